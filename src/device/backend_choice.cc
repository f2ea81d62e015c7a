// Which backend this process uses. The CUDA backend is chosen only when asked for or left to
// "auto", a driver loads, a device is visible and this build contains it; the HIP backend when
// ACCL_BACKEND=hip (or "auto" without CUDA on a machine with /dev/kfd), a HIP runtime loads, an
// AMD GPU is visible and this build embeds the HIP kernels; otherwise the host backend. Said
// once at INFO (WARN when ACCL_BACKEND=cuda or hip could not be honoured).
#include "device/backend_choice.h"
#include <unistd.h>
#include <mutex>
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "device/backend.h"
#include "device/cuda/cuda_backend.h"
#include "device/cuda/cuda_device.h"
#include "device/hip/hip_driver.h"
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
                               const std::string& devicesWhy, bool hipBuilt, bool asked) {
  BackendChoice c;
  std::string reason;
  if (runtime == nullptr) {
    reason = runtimeWhy;
  } else if (devices == 0) {
    reason = devicesWhy;
  } else if (!hipBuilt) {
    reason = std::to_string(devices) + " AMD GPU(s) visible to " + runtime->soname +
             ", but this build of ACCL has no HIP kernels (clang-19 was not found when it was built)";
  } else {
    c.hip = true;
    c.why = "HIP backend (" + std::to_string(devices) + " device(s), " + runtime->soname + ", ROCm " +
            std::to_string(runtime->runtimeMajor) + "." + std::to_string(runtime->runtimeVersion / 100000 % 100) +
            (asked ? ", ACCL_BACKEND=hip)" : ", no CUDA device)");
    return c;
  }
  c.why = "host backend: " + reason + (asked ? " (ACCL_BACKEND=hip cannot be honoured)" : "");
  c.warn = asked;
  return c;
}

bool amdGpuDriverPresent() { return access("/dev/kfd", F_OK) == 0; }

namespace {

struct HipProbe {
  BackendChoice choice;
  const hip::HipApi* runtime = nullptr;
};

// Load the runtime, count the devices, decide.
HipProbe hipChoice(bool asked) {
  HipProbe p;
  std::string runtimeWhy, devicesWhy;
  p.runtime = hip::loadHipRuntime(&runtimeWhy);
  const int devices = p.runtime ? hip::probeDevices(*p.runtime, &devicesWhy) : 0;
  p.choice = chooseHipBackend(p.runtime, runtimeWhy, devices, devicesWhy, hipKernelsBuilt(), asked);
  return p;
}

struct ProcessChoice {
  std::string why;
  const cuda::DriverApi* driver = nullptr;  // set when the CUDA or the HIP backend was chosen
  std::shared_ptr<Backend> backend;
};

const ProcessChoice& processChoice() {
  static ProcessChoice pc;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string setting = param::backend();
    std::string driverWhy;
    const bool wantHip = setting == "hip";
    const bool noCuda = setting == "host" || wantHip;
    const cuda::DriverApi* driver = noCuda ? nullptr : cuda::loadDriver(&driverWhy);
    HipProbe amd;
    BackendChoice c;
    if (wantHip) {
      amd = hipChoice(true);
      c = amd.choice;
    } else {
      c = chooseBackend(setting, driver, driverWhy, cudaKernelsBuilt());
      // "auto" without CUDA tries HIP only where the AMD GPU kernel driver is (/dev/kfd): other
      // machines never load ROCm's runtime, and their line stays the CUDA reason.
      if (!c.cuda && !c.warn && setting != "host" && amdGpuDriverPresent()) {
        amd = hipChoice(false);
        if (amd.choice.hip) c = amd.choice;
        else c.why += "; " + amd.choice.why.substr(amd.choice.why.find(": ") + 2);
      }
    }
    if (c.hip) driver = hip::hipDriverTable(*amd.runtime);
    pc.why = c.why;
    if (c.warn) WARN("%s", c.why.c_str());
    else INFO(kSubsysInit, "%s", c.why.c_str());
    if (c.cuda || c.hip) {
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
