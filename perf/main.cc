// The main() of every *_perf binary: CMake compiles this once per collective with
// ACCL_PERF_BINARY set to the binary's name.
#include <cstdio>

#include "collectives/registry.h"
#include "harness/runner.h"

int main(int argc, char** argv) {
  const accl::perf::Collective* collective = accl::perf::findCollective(ACCL_PERF_BINARY);
  if (!collective) {
    std::fprintf(stderr, "no collective named %s\n", ACCL_PERF_BINARY);
    return 5;
  }
  return accl::perf::runPerfTest(argc, argv, *collective);
}
