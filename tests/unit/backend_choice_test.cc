// Backend choice and pointer kinds against a fake CUDA driver table: what a GPU machine's
// driver would answer, checked on machines without one.
#include <gtest/gtest.h>
#include <cstring>
#include "device/backend.h"
#include "device/backend_choice.h"
#include "device/cuda/pointer_kind.h"

namespace accl::dev {
namespace {

using cuda::CUresult;

// A fake driver: `deviceCount` devices; memory in [deviceLo, deviceHi) is device memory of
// device 1, [managedLo, managedHi) managed; anything else is unknown to it (pageable host).
struct FakeDriver {
  static inline int deviceCount = 1;
  static inline CUresult countResult = cuda::kSuccess;
  static inline char deviceRange[256];
  static inline char managedRange[256];

  static bool in(const char* range, cuda::CUdeviceptr p) {
    auto lo = reinterpret_cast<cuda::CUdeviceptr>(range);
    return p >= lo && p < lo + sizeof(deviceRange);
  }
  static CUresult count(int* n) {
    *n = deviceCount;
    return countResult;
  }
  static CUresult attribute(void* data, int attr, cuda::CUdeviceptr p) {
    const bool dev = in(deviceRange, p), managed = in(managedRange, p);
    if (!dev && !managed) return cuda::kErrorInvalidValue;
    if (attr == cuda::kPointerAttributeMemoryType) {
      unsigned type = cuda::kMemoryTypeDevice;  // the driver reports managed memory as device too
      std::memcpy(data, &type, sizeof type);
    } else if (attr == cuda::kPointerAttributeDeviceOrdinal) {
      int ordinal = 1;
      std::memcpy(data, &ordinal, sizeof ordinal);
    } else if (attr == cuda::kPointerAttributeIsManaged) {
      int m = managed;
      std::memcpy(data, &m, sizeof m);
    } else {
      return cuda::kErrorInvalidValue;
    }
    return cuda::kSuccess;
  }
  static CUresult errorString(CUresult r, const char** text) {
    *text = r == 100 ? "CUDA_ERROR_NO_DEVICE" : nullptr;
    return *text ? cuda::kSuccess : cuda::kErrorInvalidValue;
  }
  static cuda::DriverApi table() {
    cuda::DriverApi api;
    api.deviceGetCount = count;
    api.pointerGetAttribute = attribute;
    api.getErrorString = errorString;
    return api;
  }
};

TEST(BackendChoice, NoDriverMeansHostBackendWithTheLoaderReason) {
  BackendChoice c = chooseBackend("auto", nullptr, "no CUDA driver (libcuda.so.1: cannot open)", true);
  EXPECT_FALSE(c.cuda);
  EXPECT_FALSE(c.warn);
  EXPECT_EQ(c.why, "host backend: no CUDA driver (libcuda.so.1: cannot open)");
}

TEST(BackendChoice, AskingForCudaWithoutADriverWarnsAndKeepsTheHostBackend) {
  BackendChoice c = chooseBackend("cuda", nullptr, "no CUDA driver", true);
  EXPECT_FALSE(c.cuda);
  EXPECT_TRUE(c.warn);
  EXPECT_NE(c.why.find("ACCL_BACKEND=cuda cannot be honoured"), std::string::npos) << c.why;
}

TEST(BackendChoice, ADriverWithNoDeviceNamesTheDriverError) {
  cuda::DriverApi api = FakeDriver::table();
  FakeDriver::countResult = 100;
  BackendChoice c = chooseBackend("auto", &api, "", true);
  FakeDriver::countResult = cuda::kSuccess;
  EXPECT_FALSE(c.cuda);
  EXPECT_EQ(c.why, "host backend: cuDeviceGetCount failed: CUDA_ERROR_NO_DEVICE");
}

TEST(BackendChoice, ADeviceIsUsedOnlyWhenTheBuildHasTheCudaKernels) {
  cuda::DriverApi api = FakeDriver::table();
  FakeDriver::deviceCount = 2;
  BackendChoice without = chooseBackend("auto", &api, "", false);
  BackendChoice with = chooseBackend("auto", &api, "", true);
  BackendChoice forcedHost = chooseBackend("host", &api, "", true);
  FakeDriver::deviceCount = 1;
  EXPECT_FALSE(without.cuda);
  EXPECT_NE(without.why.find("2 CUDA device(s) visible, but this build of ACCL has no CUDA kernels"),
            std::string::npos) << without.why;
  EXPECT_TRUE(with.cuda) << with.why;
  EXPECT_FALSE(forcedHost.cuda);
  EXPECT_EQ(forcedHost.why, "host backend (ACCL_BACKEND=host)");
}

TEST(BackendChoice, AnUnknownSettingWarnsAndUsesTheHostBackend) {
  BackendChoice c = chooseBackend("rocm", nullptr, "", true);
  EXPECT_FALSE(c.cuda);
  EXPECT_TRUE(c.warn);
  EXPECT_NE(c.why.find("ACCL_BACKEND=rocm is not one of auto, host, cuda"), std::string::npos) << c.why;
}

TEST(PointerKind, DriverAnswersSortHostDeviceAndManagedMemory) {
  cuda::DriverApi api = FakeDriver::table();
  int onStack = 0;
  cuda::PointerInfo host = cuda::pointerInfo(api, &onStack);
  cuda::PointerInfo dev = cuda::pointerInfo(api, FakeDriver::deviceRange + 8);
  cuda::PointerInfo managed = cuda::pointerInfo(api, FakeDriver::managedRange);
  EXPECT_EQ(host.kind, cuda::PointerKind::Host);
  EXPECT_EQ(dev.kind, cuda::PointerKind::Device);
  EXPECT_EQ(dev.device, 1);
  EXPECT_EQ(managed.kind, cuda::PointerKind::Managed);
  EXPECT_STREQ(cuda::pointerKindName(dev.kind), "device memory");
}

TEST(ProcessBackend, WithoutAUsableCudaBackendTheProcessUsesTheHostBackend) {
  // Without a driver (CI); the fakegpu and gpu tests cover the other case.
  std::string why;
  if (cuda::loadDriver(&why) != nullptr) GTEST_SKIP() << "SKIP: a CUDA driver is present (fakegpu/gpu tests cover it)";
  EXPECT_STREQ(processBackend()->name(), "host");
  EXPECT_EQ(processBackendWhy().rfind("host backend", 0), 0u) << processBackendWhy();
}

}  // namespace
}  // namespace accl::dev
