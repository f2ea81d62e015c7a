// direct_launch_log.h: what the fake driver's launch log says about the direct path's tests:
// direct, LL and mailbox kernels launched since fakeCudaLogReset, the smallest direct grid and
// the largest LL grid and block among them.
#pragma once

namespace accl_cuda_test {

struct KernelLaunches {
  int direct = 0, ll = 0, mailbox = 0;
  unsigned minDirectGrid = ~0u;
  unsigned maxLlGrid = 0, maxLlBlock = 0;
};
KernelLaunches kernelLaunchesSinceReset();

}  // namespace accl_cuda_test
