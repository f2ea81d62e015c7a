// The library's own driver loader (src/device/cuda/driver_api.cc: dlopen("libcuda.so.1") and
// every entry point it binds) finds the fake in a program built with accl_add_fakegpu_test,
// and the pointer-kind check reads device, pinned and pageable memory the way it would on a GPU.
#include <gtest/gtest.h>
#include <vector>
#include "device/cuda/driver_api.h"
#include "device/cuda/pointer_kind.h"
#include "fake_cuda/fake_cuda_test_api.h"

namespace accl::dev::cuda {
namespace {

TEST(DriverApiOnFake, LoaderBindsEveryEntryPointFromTheFake) {
  ASSERT_TRUE(fakeCudaAvailable());
  std::string why;
  const DriverApi* api = loadDriver(&why);
  ASSERT_NE(nullptr, api) << why;
  int n = 0;
  ASSERT_EQ(kSuccess, api->deviceGetCount(&n));
  EXPECT_GE(n, 1);
  const char* text = nullptr;
  ASSERT_EQ(kSuccess, api->getErrorString(kErrorNotReady, &text));
  EXPECT_STREQ("device not ready", text);
}

TEST(DriverApiOnFake, PointerKindsOfDevicePinnedAndPageableMemory) {
  std::string why;
  const DriverApi* api = loadDriver(&why);
  ASSERT_NE(nullptr, api) << why;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  ASSERT_EQ(kSuccess, api->deviceGet(&dev, 0));
  ASSERT_EQ(kSuccess, api->primaryCtxRetain(&ctx, dev));
  ASSERT_EQ(kSuccess, api->ctxSetCurrent(ctx));
  CUdeviceptr d = 0;
  ASSERT_EQ(kSuccess, api->memAlloc(&d, 256));
  void* pinned = nullptr;
  ASSERT_EQ(kSuccess, api->memHostAlloc(&pinned, 256, kMemHostAllocDeviceMap));
  std::vector<char> pageable(256);

  PointerInfo info = pointerInfo(*api, reinterpret_cast<void*>(d + 8));
  EXPECT_EQ(PointerKind::Device, info.kind);
  EXPECT_EQ(0, info.device);
  EXPECT_EQ(PointerKind::Host, pointerInfo(*api, pinned).kind);
  EXPECT_EQ(PointerKind::Host, pointerInfo(*api, pageable.data()).kind);
  EXPECT_EQ(1, fakeCudaIsDevicePointer(reinterpret_cast<void*>(d)));
  EXPECT_EQ(0, fakeCudaIsDevicePointer(pinned));

  ASSERT_EQ(kSuccess, api->memFreeHost(pinned));
  ASSERT_EQ(kSuccess, api->memFree(d));
  ASSERT_EQ(kSuccess, api->primaryCtxRelease(dev));
}

}  // namespace
}  // namespace accl::dev::cuda
