// Which backend this process uses. The CUDA backend is chosen only when asked for or left to
// "auto", a driver loads, a device is visible and this build contains it; otherwise the host
// backend, said once at INFO (WARN when ACCL_BACKEND=cuda could not be honoured).
#include "device/backend_choice.h"
#include <mutex>
#include "base/log.h"
#include "base/param.h"
#include "device/backend.h"

namespace accl::dev {
namespace {

// The CUDA backend (issue 10) has not landed yet: the seam, the driver loader and pointer
// checks are here, the kernels and the device data path are not.
constexpr bool kCudaBackendBuilt = false;

}  // namespace

BackendChoice chooseBackend(const std::string& setting, const cuda::DriverApi* driver,
                            const std::string& driverWhy, bool cudaBuilt) {
  BackendChoice c;
  const bool wantCuda = setting == "cuda";
  if (setting == "host") {
    c.why = "host backend (ACCL_BACKEND=host)";
    return c;
  }
  if (!wantCuda && !setting.empty() && setting != "auto") {
    c.why = "host backend (ACCL_BACKEND=" + setting + " is not one of auto, host, cuda)";
    c.warn = true;
    return c;
  }
  std::string reason;
  int devices = 0;
  if (driver == nullptr) {
    reason = driverWhy;
  } else if (cuda::CUresult r = driver->deviceGetCount(&devices); r != cuda::kSuccess || devices == 0) {
    reason = r != cuda::kSuccess ? "cuDeviceGetCount failed: " + cuda::errorText(*driver, r) : "no CUDA device visible";
  } else if (!cudaBuilt) {
    reason = std::to_string(devices) + " CUDA device(s) visible, but this build of ACCL has no CUDA backend";
  } else {
    c.cuda = true;
    c.why = "CUDA backend (" + std::to_string(devices) + " device(s))";
    return c;
  }
  c.why = "host backend: " + reason + (wantCuda ? " (ACCL_BACKEND=cuda cannot be honoured)" : "");
  c.warn = wantCuda;
  return c;
}

namespace {
std::string gWhy;
}  // namespace

const std::string& processBackendWhy() {
  processBackend();
  return gWhy;
}

std::shared_ptr<Backend> processBackend() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string setting = param::backend();
    std::string driverWhy;
    const cuda::DriverApi* driver = setting == "host" ? nullptr : cuda::loadDriver(&driverWhy);
    BackendChoice c = chooseBackend(setting, driver, driverWhy, kCudaBackendBuilt);
    gWhy = c.why;
    if (c.warn) WARN("%s", c.why.c_str());
    else INFO(kSubsysInit, "%s", c.why.c_str());
  });
  return hostBackend();
}

}  // namespace accl::dev
