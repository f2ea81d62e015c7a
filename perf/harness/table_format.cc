#include "table_format.h"

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <ctime>

namespace accl::perf {
namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(static_cast<size_t>(n), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

std::string nowText() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &local);
  return buf;
}

}  // namespace

std::string fitNumber(double value, int width) {
  // Digits before the decimal point decide how many decimals still fit.
  int digits = 0;
  for (uint64_t v = 1; value >= static_cast<double>(v) && digits < 20; v *= 10) ++digits;
  if (digits < width - 2) return format("%*.2f", width, value);
  if (digits < width - 1) return format("%*.1f", width, value);
  if (digits < width + 1) return format("%*.0f", width, value);
  if (width >= 7) return format("%*.1e", width, value);
  return format("%*.0e", width, value);
}

std::string preambleText(const char* program, const Options& o, int ncclHeaders, int ncclLibrary) {
  std::string s = format("# nccl-tests version 2.19.6 nccl-headers=%d nccl-library=%d\n", ncclHeaders, ncclLibrary);
  s += format("# Collective test starting: %s\n", program);
  const bool factor = o.stepFactor > 1;
  s += format(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
      "validation: %d graph: %d unalign: %d\n",
      o.nThreads, o.nGpus, o.minBytes, o.maxBytes, factor ? o.stepFactor : o.stepBytes, factor ? "factor" : "bytes",
      o.warmupIters, o.iters, o.aggIters, o.check, o.cudaGraph, o.unalign);
  if (o.blocking == 1) s += "# Blocking Enabled: wait for completion and barrier after each collective \n";
  if (o.blocking > 1) s += "# Blocking Enabled: wait for completion after each collective (no barrier) \n";
  if (o.parallelInit) s += "# Parallel Init Enabled: threads call into NcclInitRank concurrently \n";
  s += "#\n# Using devices\n";
  return s;
}

std::string pciHex(const unsigned* pci) {
  return pci ? format("%04x:%02x:%02x", pci[0], pci[1], pci[2]) : "0000:00:00";
}

std::string deviceLine(int rank, int group, int pid, const std::string& host, int device,
                       const std::string& deviceName, const unsigned* pci) {
  return format("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", rank, group, pid, host.c_str(), device,
                pciHex(pci).c_str(), deviceName.c_str());
}

std::string tableHeader(bool cpuTime, bool timestamps) {
  const char* timeLabel = cpuTime ? "cputime" : "time";
  const int pad = timestamps ? 19 : 0;
  std::string s = "#\n";
  s += format("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
              "", "", "");
  s += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type",
              "redop", "root", timeLabel, "algbw", "busbw", "#wrong", timeLabel, "algbw", "busbw", "#wrong", pad,
              timestamps ? "timestamp" : "");
  s += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "",
              "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", pad,
              timestamps ? "%Y-%m-%d %H:%M:%S" : "");
  return s;
}

std::string rowPreamble(size_t bytes, size_t count, const std::string& type, const std::string& redop, int root) {
  const std::string rootText = format("%6i", root);
  return format("%12zu  %12zu  %8s  %6s  %6s", bytes, count, type.c_str(), redop.c_str(), rootText.c_str());
}

std::string rowBody(double timeUs, double algBw, double busBw, double wrong) {
  const std::string t = fitNumber(timeUs, 7), a = fitNumber(algBw, 6), b = fitNumber(busBw, 6);
  if (wrong < 0) return format("  %7s  %6s  %6s    N/A", t.c_str(), a.c_str(), b.c_str());
  return format("  %7s  %6s  %6s  %6g", t.c_str(), a.c_str(), b.c_str(), wrong);
}

std::string timestampColumn() { return format("%21s", nowText().c_str()); }

std::string footerText(const char* program, int outOfBounds, double avgBusBw, double minBwCheck) {
  std::string s = format("# %-20s : %d %s\n", "Out of bounds values", outOfBounds, outOfBounds ? "FAILED" : "OK");
  const char* bwVerdict = minBwCheck < 0 ? "" : (avgBusBw < minBwCheck * 0.9 ? "FAILED" : "OK");
  s += format("# %-20s : %g %s\n", "Avg bus bandwidth", avgBusBw, bwVerdict);
  s += "#\n";
  s += format("# Collective test concluded: %s\n", program);
  s += "#\n";
  return s;
}

}  // namespace accl::perf
