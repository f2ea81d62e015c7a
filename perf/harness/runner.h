// The shared harness: runs `collective` as nccl-tests would (options, launch, sweep, timing,
// verification, table, JSON) and returns the process exit code.
#pragma once

#include "collective.h"

namespace accl::perf {

int runPerfTest(int argc, char** argv, const Collective& collective);

}  // namespace accl::perf
