// The rules of the real CUDA driver that the fake enforces so the CUDA backend cannot break
// them unseen (issue 23, item 4): what a stream capture forbids on which thread, hardware
// queues shared by streams (CUDA_DEVICE_MAX_CONNECTIONS), the legacy default stream's implicit
// synchronization, device access to host memory, lazy module loading, IPC mappings.
// Like fake_cuda_test, this program also runs on a REAL driver (docs/fake-cuda.md): there a
// failure means the fake (or the documentation it follows) is wrong; checks that only the fake
// can answer (its stderr lines, its queue mapping) are skipped.
#include <cuda.h>
#include <gtest/gtest.h>
#include <atomic>
#include <string>
#include <thread>
#include "fake_cuda/fake_cuda_fixture.h"

namespace {

using DriverRules = FakeCuda;

// Runs body on a new thread with ctx current (the way another thread of a program, or ACCL's
// own threads, call the driver).
template <class F>
void onOtherThread(CUcontext ctx, F body) {
  std::thread([&] {
    ASSERT_EQ(CUDA_SUCCESS, cuCtxSetCurrent(ctx));
    body();
  }).join();
}

CUstreamCaptureStatus captureStatus(CUstream s) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  EXPECT_EQ(CUDA_SUCCESS, cuStreamIsCapturing(s, &status));
  return status;
}

// ---- rule 1: stream capture modes ----

TEST_F(DriverRules, GlobalCaptureRefusesAllocationOnAnotherThreadAndIsInvalidated) {
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  std::string err;
  onOtherThread(ctx_, [&] {
    CUdeviceptr p = 0;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemAlloc(&p, 256));
    err = ::testing::internal::GetCapturedStderr();
  });
  if (onFake()) {
    EXPECT_NE(std::string::npos, err.find("cuMemAlloc during a global-mode stream capture")) << err;
  }
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_INVALIDATED, captureStatus(stream_));
  CUgraph graph = reinterpret_cast<CUgraph>(1);
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
  EXPECT_EQ(nullptr, graph);
}

TEST_F(DriverRules, GlobalCaptureRefusesHostAllocationRegistrationAndModulesOnItsOwnThread) {
  std::vector<char> pageable(4096);
  void* pinned = nullptr;
  CU_OK(cuMemHostAlloc(&pinned, 64, 0));
  auto refused = [&](const char* what, auto call) {
    CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, call()) << what;
    CUgraph graph = nullptr;
    EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph)) << what;
  };
  void* host = nullptr;
  CUmodule module = nullptr;
  ::testing::internal::CaptureStderr();
  refused("cuMemHostAlloc", [&] { return cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_DEVICEMAP); });
  refused("cuMemHostRegister", [&] { return cuMemHostRegister(pageable.data(), pageable.size(), CU_MEMHOSTREGISTER_DEVICEMAP); });
  refused("cuMemFreeHost", [&] { return cuMemFreeHost(pinned); });
  refused("cuModuleLoadData", [&] { return cuModuleLoadData(&module, kernelImage().data()); });
  ::testing::internal::GetCapturedStderr();
  CU_OK(cuMemFreeHost(pinned));  // outside the capture: fine
}

TEST_F(DriverRules, RelaxedThreadMayAllocateDuringAGlobalCapture) {
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  onOtherThread(ctx_, [&] {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    EXPECT_EQ(CUDA_SUCCESS, cuThreadExchangeStreamCaptureMode(&mode));
    EXPECT_EQ(CU_STREAM_CAPTURE_MODE_GLOBAL, mode);  // a new thread starts in global mode
    CUdeviceptr p = 0;
    void* host = nullptr;
    std::vector<char> pageable(4096);
    EXPECT_EQ(CUDA_SUCCESS, cuMemAlloc(&p, 256));
    EXPECT_EQ(CUDA_SUCCESS, cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_DEVICEMAP));
    EXPECT_EQ(CUDA_SUCCESS, cuMemHostRegister(pageable.data(), pageable.size(), CU_MEMHOSTREGISTER_DEVICEMAP));
    EXPECT_EQ(CUDA_SUCCESS, cuMemHostUnregister(pageable.data()));
    EXPECT_EQ(CUDA_SUCCESS, cuMemFreeHost(host));
    EXPECT_EQ(CUDA_SUCCESS, cuMemFree(p));
    EXPECT_EQ(CUDA_SUCCESS, cuThreadExchangeStreamCaptureMode(&mode));  // push-pop
    EXPECT_EQ(CU_STREAM_CAPTURE_MODE_RELAXED, mode);
  });
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, captureStatus(stream_));
  CUgraph graph = nullptr;
  CU_OK(cuStreamEndCapture(stream_, &graph));
  ASSERT_NE(nullptr, graph);
  CU_OK(cuGraphDestroy(graph));
}

TEST_F(DriverRules, ThreadLocalCaptureRefusesOnlyItsOwnThread) {
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  onOtherThread(ctx_, [&] {
    CUdeviceptr p = 0;  // this thread is in global mode, but the capture is not global
    EXPECT_EQ(CUDA_SUCCESS, cuMemAlloc(&p, 256));
    EXPECT_EQ(CUDA_SUCCESS, cuMemFree(p));
  });
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, captureStatus(stream_));
  CUdeviceptr p = 0;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemAlloc(&p, 256));
  ::testing::internal::GetCapturedStderr();
  CUgraph graph = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
}

TEST_F(DriverRules, RelaxedCaptureForbidsNothing) {
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED));
  CUdeviceptr p = 0, q = 0;
  CU_OK(cuMemAlloc(&p, 256));
  onOtherThread(ctx_, [&] { EXPECT_EQ(CUDA_SUCCESS, cuMemAlloc(&q, 256)); });
  CU_OK(cuMemFree(p));
  CU_OK(cuMemFree(q));
  CUgraph graph = nullptr;
  CU_OK(cuStreamEndCapture(stream_, &graph));
  CU_OK(cuGraphDestroy(graph));
}

TEST_F(DriverRules, CaptureNotRelaxedEndsOnlyOnTheThreadThatBeganIt) {
  CUgraph graph = nullptr;
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ::testing::internal::CaptureStderr();
  onOtherThread(ctx_, [&] { EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, cuStreamEndCapture(stream_, &graph)); });
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, captureStatus(stream_));
  CU_OK(cuStreamEndCapture(stream_, &graph));
  CU_OK(cuGraphDestroy(graph));
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED));
  onOtherThread(ctx_, [&] { EXPECT_EQ(CUDA_SUCCESS, cuStreamEndCapture(stream_, &graph)); });
  CU_OK(cuGraphDestroy(graph));
}

}  // namespace
