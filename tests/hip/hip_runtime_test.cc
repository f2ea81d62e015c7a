// The HIP runtime loader (src/device/hip/hip_api.cc) against the real libamdhip64 that the
// machine has (Debian's libamdhip64-5 here, no AMD GPU): it loads, every entry point resolves
// to what dlsym of the same library gives (or is optional, with a reason), "no device" is
// reported with the runtime's own error names, and ACCL_BACKEND=hip ends on the host backend
// with a WARN that says why. Skipped, with the reason, where no libamdhip64 is installed.
#include <cstdio>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <cstdlib>
#include <string>
#include "base/log.h"
#include "device/backend.h"
#include "device/backend_choice.h"
#include "device/hip/hip_api.h"

namespace accl::dev {
namespace {

const hip::HipApi* runtimeOrSkip(std::string* why) { return hip::loadHipRuntime(why); }

#define REQUIRE_RUNTIME(api)                                              \
  std::string loadWhy;                                                    \
  const hip::HipApi* api = runtimeOrSkip(&loadWhy);                       \
  if (api == nullptr && loadWhy.rfind("no HIP runtime", 0) == 0)          \
    GTEST_SKIP() << "SKIP: " << loadWhy << " (Debian package libamdhip64-5: make deps)"; \
  ASSERT_NE(api, nullptr) << loadWhy

TEST(HipRuntime, LoadsTheNewestSonameAndBindsEveryEntryPoint) {
  REQUIRE_RUNTIME(api);
  // Newest first: no newer soname than the one loaded is installed.
  bool newer = true;
  for (const std::string& name : hip::hipSonames()) {
    if (name == api->soname) {
      newer = false;
      continue;
    }
    if (newer) {
      void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      EXPECT_EQ(h, nullptr) << name << " is installed but " << api->soname << " was loaded";
      if (h) dlclose(h);
    }
  }
  EXPECT_FALSE(newer) << api->soname << " is not in the list";
  EXPECT_EQ(std::to_string(api->runtimeMajor), api->soname.substr(api->soname.rfind('.') + 1))
      << "hipRuntimeGetVersion says " << api->runtimeVersion;

  // Every binding against dlsym on the same library, independently.
  void* lib = dlopen(api->soname.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  std::string optionalMissing;
  for (const hip::SymbolBinding& b : hip::hipBindings()) {
    SCOPED_TRACE(b.names.front());
    std::string first;  // the first of its names that the library has (newest first)
    for (const std::string& n : b.names)
      if (first.empty() && dlsym(lib, n.c_str()) != nullptr) first = n;
    EXPECT_EQ(b.bound, first);
    if (!first.empty()) {
      EXPECT_EQ(b.address, dlsym(lib, first.c_str()));
    } else {
      EXPECT_TRUE(b.optional) << "a required entry point is missing";
      EXPECT_FALSE(b.whyOptional.empty());
      optionalMissing += " " + b.names.front();
    }
  }
  dlclose(lib);
  std::printf("%s (runtime %d): %zu entry points, optional and missing:%s\n", api->soname.c_str(),
              api->runtimeVersion, hip::hipBindings().size(), optionalMissing.empty() ? " none" : optionalMissing.c_str());

  // ROCm 5 has no R0600 entry points: the plain name, the old struct. ROCm 6 and later: R0600.
  if (api->runtimeMajor >= 6) {
    EXPECT_EQ(api->propertiesLayout, 600);
  } else {
    EXPECT_EQ(api->propertiesLayout, 0);
  }
}

TEST(HipRuntime, NoDeviceIsReportedWithTheRuntimesOwnErrors) {
  REQUIRE_RUNTIME(api);
  std::string why;
  const int devices = hip::probeDevices(*api, &why);
  if (devices > 0) GTEST_SKIP() << "SKIP: " << devices << " AMD GPU(s) visible: this test is for machines without one";
  int count = -1;
  EXPECT_EQ(api->getDeviceCount(&count), hip::kErrorNoDevice);
  EXPECT_EQ(count, 0);
  EXPECT_NE(why.find("no AMD GPU visible to " + api->soname), std::string::npos) << why;
  EXPECT_NE(why.find("hipGetDeviceCount: hipErrorNoDevice (100)"), std::string::npos) << why;
  EXPECT_NE(why.find("count 0"), std::string::npos) << why;
}

TEST(HipRuntime, AskingForHipWithoutADeviceWarnsAndRunsTheHostBackend) {
  REQUIRE_RUNTIME(api);
  std::string devWhy;
  if (hip::probeDevices(*api, &devWhy) > 0) GTEST_SKIP() << "SKIP: an AMD GPU is visible";
  // Each test runs in its own process (gtest_discover_tests), so this is the first choice made.
  setenv("ACCL_BACKEND", "hip", 1);
  ASSERT_NE(processBackend(), nullptr);
  EXPECT_STREQ(processBackend()->name(), "host");
  EXPECT_FALSE(processUsesCuda());
  const std::string& why = processBackendWhy();
  EXPECT_EQ(why.rfind("host backend: no AMD GPU visible to " + api->soname, 0), 0u) << why;
  EXPECT_NE(why.find("(ACCL_BACKEND=hip cannot be honoured)"), std::string::npos) << why;
  // Said once, as a WARN (the user asked for something the process cannot have).
  EXPECT_NE(std::string(lastErrorText()).find(why), std::string::npos) << lastErrorText();
}

TEST(HipChoice, EveryObstacleIsNamed) {
  const BackendChoice noRuntime = chooseHipBackend(nullptr, "no HIP runtime (libamdhip64.so.7: not found)", 0, "", true);
  EXPECT_FALSE(noRuntime.cuda);
  EXPECT_TRUE(noRuntime.warn);
  EXPECT_EQ(noRuntime.why, "host backend: no HIP runtime (libamdhip64.so.7: not found) (ACCL_BACKEND=hip cannot be honoured)");
  hip::HipApi rt;
  rt.soname = "libamdhip64.so.6";
  rt.runtimeMajor = 6;
  rt.runtimeVersion = 60241134;
  const BackendChoice noKernels = chooseHipBackend(&rt, "", 2, "", false);
  EXPECT_FALSE(noKernels.cuda);
  EXPECT_FALSE(noKernels.hip);
  EXPECT_TRUE(noKernels.warn);
  EXPECT_EQ(noKernels.why, "host backend: 2 AMD GPU(s) visible to libamdhip64.so.6, but this build of ACCL has no HIP "
                           "kernels (clang-19 was not found when it was built) (ACCL_BACKEND=hip cannot be honoured)");
  // Devices and kernels: the HIP backend, said at INFO with the runtime it found.
  const BackendChoice asked = chooseHipBackend(&rt, "", 2, "", true);
  EXPECT_TRUE(asked.hip);
  EXPECT_FALSE(asked.cuda);
  EXPECT_FALSE(asked.warn);
  EXPECT_EQ(asked.why, "HIP backend (2 device(s), libamdhip64.so.6, ROCm 6.2, ACCL_BACKEND=hip)");
  // "auto" trying HIP after CUDA: no WARN when it cannot be had.
  const BackendChoice autoNoDevice = chooseHipBackend(&rt, "", 0, "no AMD GPU visible to libamdhip64.so.6", true, false);
  EXPECT_FALSE(autoNoDevice.hip);
  EXPECT_FALSE(autoNoDevice.warn);
  EXPECT_EQ(autoNoDevice.why, "host backend: no AMD GPU visible to libamdhip64.so.6");
  const BackendChoice autoHip = chooseHipBackend(&rt, "", 1, "", true, false);
  EXPECT_TRUE(autoHip.hip);
  EXPECT_EQ(autoHip.why, "HIP backend (1 device(s), libamdhip64.so.6, ROCm 6.2, no CUDA device)");
}

TEST(HipChoice, PointerMemoryTypesAreReadByTheRuntimesMajor) {
  using hip::MemoryKind;
  // ROCm 5.2's hipMemoryType: host, device, array, unified from 0.
  EXPECT_EQ(hip::memoryKind(0, 5), MemoryKind::Host);
  EXPECT_EQ(hip::memoryKind(1, 5), MemoryKind::Device);
  EXPECT_EQ(hip::memoryKind(2, 5), MemoryKind::Array);
  EXPECT_EQ(hip::memoryKind(3, 5), MemoryKind::Unified);
  // ROCm 6 and 7: CUDA's numbering (0 unregistered), AMD's array and unified at 10 and 11.
  for (int major : {6, 7}) {
    EXPECT_EQ(hip::memoryKind(0, major), MemoryKind::Unregistered);
    EXPECT_EQ(hip::memoryKind(1, major), MemoryKind::Host);
    EXPECT_EQ(hip::memoryKind(2, major), MemoryKind::Device);
    EXPECT_EQ(hip::memoryKind(3, major), MemoryKind::Managed);
    EXPECT_EQ(hip::memoryKind(10, major), MemoryKind::Array);
    EXPECT_EQ(hip::memoryKind(11, major), MemoryKind::Unified);
  }
  EXPECT_EQ(hip::memoryKind(4, 5), MemoryKind::Unknown);
}

}  // namespace
}  // namespace accl::dev
