// direct_launch_log.h: what the fake driver's launch log says about the direct path's tests:
// direct, LL and mailbox kernels launched since fakeCudaLogReset, the smallest direct grid and
// the largest LL grid and block among them; and REQUIRE_FAKE for the tests that read it.
#pragma once
#include <string>
#include "cuda/test_driver.h"
#include "fake_cuda/fake_cuda_test_api.h"

// The start of a test that reads the fake driver's log: `d` is the test driver; skipped, saying
// why, without one or on a real driver.
#define REQUIRE_FAKE(d)                                               \
  std::string why_;                                                   \
  const TestDriver* d = testDriver(&why_);                            \
  if (d == nullptr) GTEST_SKIP() << "SKIP: " << why_;                 \
  if (!fakeCudaAvailable()) GTEST_SKIP() << "SKIP: the checks read the fake driver's log"

namespace accl_cuda_test {

struct KernelLaunches {
  int direct = 0, ll = 0, mailbox = 0;
  unsigned minDirectGrid = ~0u;
  unsigned maxLlGrid = 0, maxLlBlock = 0;
};
KernelLaunches kernelLaunchesSinceReset();

}  // namespace accl_cuda_test
