// The text layout of nccl-tests output: preamble, table header, rows, footer
// (spec/nccl-tests-cli.md section 5). Pure string builders so they can be unit-tested.
#pragma once

#include <cstddef>
#include <string>

#include "options.h"

namespace accl::perf {

// nccl-tests' number fitting: as many decimals as the width allows, else e-notation.
std::string fitNumber(double value, int width);

std::string preambleText(const char* program, const Options& o, int ncclHeaders, int ncclLibrary);
// `pci`: domain, bus, device of the GPU ([0000:00:00] when null, as for the host device).
std::string deviceLine(int rank, int group, int pid, const std::string& host, int device,
                       const std::string& deviceName, const unsigned* pci = nullptr);
std::string pciHex(const unsigned* pci);  // "0000:19:00"
std::string tableHeader(bool cpuTime, bool timestamps);
std::string rowPreamble(size_t bytes, size_t count, const std::string& type, const std::string& redop, int root);
// One placement's four columns; `wrong` < 0 means "not checked" (N/A).
std::string rowBody(double timeUs, double algBw, double busBw, double wrong);
std::string timestampColumn();
std::string footerText(const char* program, int outOfBounds, double avgBusBw, double minBwCheck);

}  // namespace accl::perf
