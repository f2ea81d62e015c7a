// direct_launch_log.h: what the fake driver's launch log says about the direct path's tests:
// direct kernels against mailbox kernels launched since fakeCudaLogReset, and the smallest
// direct grid among them.
#pragma once

namespace accl_cuda_test {

struct KernelLaunches {
  int direct = 0, mailbox = 0;
  unsigned minDirectGrid = ~0u;
};
KernelLaunches kernelLaunchesSinceReset();

}  // namespace accl_cuda_test
