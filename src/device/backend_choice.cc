// Which backend this process uses. The CUDA backend is chosen only when asked for or left to
// "auto", a driver loads, a device is visible and this build contains it; otherwise the host
// backend, said once at INFO (WARN when ACCL_BACKEND=cuda could not be honoured). ACCL_BACKEND=hip
// loads ROCm's HIP runtime and says what it found; "auto" does not try HIP, whose backend cannot
// run collectives yet.
#include "device/backend_choice.h"
#include <mutex>
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "device/backend.h"
#include "device/cuda/cuda_backend.h"
#include "device/cuda/cuda_device.h"
#include "device/hip/kernel_bundle.h"

namespace accl::dev {
namespace {

// The CUDA backend is in every build; its kernels only where nvcc was found at build time.
bool cudaKernelsBuilt() {
  size_t bytes = 0;
  cuda::embeddedKernels(&bytes);
  return bytes > 0;
}

bool hipKernelsBuilt() {
  size_t bytes = 0;
  hip::embeddedKernels(&bytes);
  return bytes > 0;
}

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
    c.why = "host backend (ACCL_BACKEND=" + setting + " is not one of auto, host, cuda, hip)";
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
    reason = std::to_string(devices) + " CUDA device(s) visible, but this build of ACCL has no CUDA kernels (nvcc was "
             "not found when it was built)";
  } else {
    c.cuda = true;
    c.why = "CUDA backend (" + std::to_string(devices) + " device(s))";
    return c;
  }
  c.why = "host backend: " + reason + (wantCuda ? " (ACCL_BACKEND=cuda cannot be honoured)" : "");
  c.warn = wantCuda;
  return c;
}

BackendChoice chooseHipBackend(const hip::HipApi* runtime, const std::string& runtimeWhy, int devices,
                               const std::string& devicesWhy, bool hipBuilt) {
  BackendChoice c;
  c.warn = true;
  std::string reason;
  if (runtime == nullptr) {
    reason = runtimeWhy;
  } else if (devices == 0) {
    reason = devicesWhy;
  } else {
    reason = std::to_string(devices) + " AMD GPU(s) visible to " + runtime->soname + ", but collectives on HIP devices " +
             "need the stream execution model, which this build does not have yet" +
             (hipBuilt ? "" : " (nor HIP kernels: clang-19 was not found when it was built)");
  }
  c.why = "host backend: " + reason + " (ACCL_BACKEND=hip cannot be honoured)";
  return c;
}

namespace {

// ACCL_BACKEND=hip: load the runtime, count the devices, decide.
BackendChoice hipChoice() {
  std::string runtimeWhy, devicesWhy;
  const hip::HipApi* runtime = hip::loadHipRuntime(&runtimeWhy);
  const int devices = runtime ? hip::probeDevices(*runtime, &devicesWhy) : 0;
  return chooseHipBackend(runtime, runtimeWhy, devices, devicesWhy, hipKernelsBuilt());
}

struct ProcessChoice {
  std::string why;
  const cuda::DriverApi* driver = nullptr;  // set when the CUDA backend was chosen
  std::shared_ptr<Backend> backend;
};

const ProcessChoice& processChoice() {
  static ProcessChoice pc;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string setting = param::backend();
    std::string driverWhy;
    const bool noCuda = setting == "host" || setting == "hip";
    const cuda::DriverApi* driver = noCuda ? nullptr : cuda::loadDriver(&driverWhy);
    BackendChoice c = setting == "hip" ? hipChoice() : chooseBackend(setting, driver, driverWhy, cudaKernelsBuilt());
    pc.why = c.why;
    if (c.warn) WARN("%s", c.why.c_str());
    else INFO(kSubsysInit, "%s", c.why.c_str());
    if (c.cuda) {
      pc.driver = driver;
      pc.backend = cuda::makeCudaAllocator(*driver);
    } else {
      pc.backend = hostBackend();
    }
  });
  return pc;
}

}  // namespace

const std::string& processBackendWhy() { return processChoice().why; }
std::shared_ptr<Backend> processBackend() { return processChoice().backend; }
bool processUsesCuda() { return processChoice().driver != nullptr; }

ncclResult_t backendForNewComm(std::shared_ptr<Backend>* out, int* cudaDev) {
  const ProcessChoice& pc = processChoice();
  if (pc.driver == nullptr) {
    *out = pc.backend;
    return ncclSuccess;
  }
  // NCCL binds a communicator to the device current at its creation (cudaGetDevice); a
  // split or shrink passes its parent's device.
  const int ordinal = *cudaDev >= 0 ? *cudaDev : cuda::currentDevice(*pc.driver);
  cuda::CudaDevice* dev = cuda::CudaDevice::get(*pc.driver, ordinal);
  if (dev == nullptr) return ncclUnhandledCudaError;
  NCCLCHECK(cuda::makeCudaBackend(*dev, out));
  *cudaDev = ordinal;
  return ncclSuccess;
}

}  // namespace accl::dev
