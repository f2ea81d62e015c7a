#include "cuda/direct_launch_log.h"
#include <algorithm>
#include <cstring>
#include "fake_cuda/fake_cuda_test_api.h"

namespace accl_cuda_test {

KernelLaunches kernelLaunchesSinceReset() {
  KernelLaunches l;
  FakeCudaLaunch f;
  for (unsigned long long i = 0; fakeCudaLaunchAt(i, &f) == 0; i++) {
    if (std::strncmp(f.kernel, "accl_direct_", 12) == 0) {
      l.direct++;
      l.minDirectGrid = std::min(l.minDirectGrid, f.grid[0]);
    } else if (std::strncmp(f.kernel, "accl_ll_", 8) == 0) {
      l.ll++;
      l.maxLlGrid = std::max(l.maxLlGrid, f.grid[0]);
      l.maxLlBlock = std::max(l.maxLlBlock, f.block[0]);
    } else if (std::strncmp(f.kernel, "accl_coll_", 10) == 0) {
      l.mailbox++;
    }
  }
  return l;
}

}  // namespace accl_cuda_test
