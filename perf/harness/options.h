// Command-line options of the perf binaries: the nccl-tests set, same letters, long names,
// defaults and size suffixes (spec/nccl-tests-cli.md section 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "buffer_mode.h"
#include "datatype.h"

namespace accl::perf {

struct Options {
  int nThreads = 1;
  int nGpus = 1;
  size_t minBytes = 32 << 20;
  size_t maxBytes = 32 << 20;
  size_t stepBytes = 1 << 20;
  size_t stepFactor = 1;
  int iters = 20;
  int aggIters = 1;
  int warmupIters = 1;
  int runCycles = 1;  // 0 = forever
  int parallelInit = 0;
  int check = 1;
  std::vector<ReduceOp> ops = {ReduceOp::kSum};
  std::string opArg = "sum";
  std::vector<ncclDataType_t> types = {ncclFloat32};
  std::string typeArg = "float";
  int root = 0;  // -1: every root
  int blocking = 0;
  int streamNull = 0;
  int timeoutSec = 0;
  int cudaGraph = 0;
  int reportCpuTime = 0;
  int reportTimestamps = 0;
  std::string jsonPath;
  int average = 1;  // 0 rank 0, 1 mean, 2 min, 3 max
  int localRegister = 0;
  int ctaPolicy = -1;
  int deviceImpl = 0;
  int deviceCtaCount = 16;
  int memoryReport = 0;
  int unalign = 0;
  int perIterTiming = 0;
  int perIterSkip = 0;
  // --host / --device (ACCL extension): where buffers live; auto = device memory when usable.
  BufferRequest buffers = BufferRequest::kAuto;
  // --time-budget S (ACCL extension): the sweep stops before a size whose row is predicted to
  // take the run past S seconds of collective time (sweep_budget.h); 0: the whole sweep.
  double timeBudgetSec = 0;
};

struct ParseResult {
  Options options;
  bool helpRequested = false;
  std::string error;             // non-empty: the run stops with this message (exit 6)
  std::vector<std::string> notes;  // "# ..." lines about ignored or corrected options
};

// Parses argv the way getopt_long does (options may repeat; the last one wins).
ParseResult parseOptions(int argc, char** argv);
// "1K" -> 1024, "1.5M", "8g"; binary suffixes; nullopt on bad text.
std::optional<size_t> parseSize(const std::string& text);
std::string usageText(const char* program);

}  // namespace accl::perf
