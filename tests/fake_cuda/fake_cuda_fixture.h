// fake_cuda_fixture.h: what the fake driver's own test programs share (fake_cuda_test.cc,
// driver_rules_test.cc): the FakeCuda fixture (device 0's primary context current, one
// non-blocking stream), whether the driver is the fake, the kernels' image, a host gate that
// holds a stream. The programs also run on a REAL driver (docs/fake-cuda.md); checks that only
// the fake can answer use NEEDS_FAKE().
#pragma once
#include <cuda.h>
#include <gtest/gtest.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include "fake_cuda/fake_cuda_test_api.h"

namespace {

// Two devices for these tests (read by the fake at its first call).
const int kDevicesSet = setenv("FAKE_CUDA_DEVICES", "2", 1);

#define CU_OK(call) ASSERT_EQ(CUDA_SUCCESS, (call)) << #call

// The fake, or a real driver (then fake-only checks are skipped).
inline bool onFake() {
  static const bool fake = fakeCudaAvailable();
  return fake;
}
inline int deviceCountNow() {
  int n = 0;
  return cuDeviceGetCount(&n) == CUDA_SUCCESS ? n : 0;
}
#define NEEDS_FAKE() \
  if (!onFake()) GTEST_SKIP() << "a check of the fake itself (running on a real driver)"
#define NEEDS_TWO_DEVICES() \
  if (deviceCountNow() < 2) GTEST_SKIP() << "needs two devices (the fake has FAKE_CUDA_DEVICES=2 here)"

// The kernels' fatbin when it was built (a real driver needs it; the fake takes any image).
inline const std::string& kernelImage() {
  static const std::string image = [] {
    const char* dir = std::getenv("ACCL_TEST_BUILD_DIR");
    std::ifstream in(std::string(dir ? dir : "build") + "/lib/accl_device_kernels.fatbin", std::ios::binary);
    std::string bytes{std::istreambuf_iterator<char>(in), {}};
    return bytes.empty() ? std::string("any image: the fake ignores it") : bytes;
  }();
  return image;
}

// A host-side gate a stream can be held behind (a host function that waits for open()).
struct Gate {
  std::atomic<bool> opened{false};
  static void wait(void* self) {
    while (!static_cast<Gate*>(self)->opened.load()) std::this_thread::yield();
  }
  void open() { opened = true; }
};

inline void appendIndex(void* arg) {
  auto* p = static_cast<std::pair<std::vector<int>*, int>*>(arg);
  p->first->push_back(p->second);
}

class FakeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, kDevicesSet);
    if (!onFake()) {
      static bool said = false;
      if (!said) fprintf(stderr, "fake_cuda_test: on a REAL CUDA driver (fake-only checks skipped)\n");
      said = true;
    }
    CU_OK(cuInit(0));
    CU_OK(cuDeviceGet(&dev_, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&ctx_, dev_));
    CU_OK(cuCtxSetCurrent(ctx_));
    CU_OK(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
  }
  void TearDown() override {
    if (stream_) cuStreamDestroy(stream_);
    cuDevicePrimaryCtxRelease(dev_);
  }
  CUdeviceptr upload(const void* data, size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(CUDA_SUCCESS, cuMemAlloc(&p, bytes));
    EXPECT_EQ(CUDA_SUCCESS, cuMemcpyHtoD(p, data, bytes));
    return p;
  }
  CUfunction function(const char* name) {
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuModuleLoadData(&m, kernelImage().data()));
    EXPECT_EQ(CUDA_SUCCESS, cuModuleGetFunction(&f, m, name));
    return f;
  }
  CUresult launch(CUfunction f, std::vector<void*> params, CUstream s) {
    return cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, 0, s, params.data(), nullptr);
  }
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
};

}  // namespace
