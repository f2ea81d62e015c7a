// backend_choice.h: which backend a process uses, decided once from ACCL_BACKEND, the CUDA
// driver (if one loads) and what this build contains. Separate from the loading so tests can
// decide with a fake driver.
#pragma once
#include <string>
#include "device/cuda/driver_api.h"
#include "device/hip/hip_api.h"

namespace accl::dev {

struct BackendChoice {
  bool cuda = false;
  bool hip = false;  // the HIP backend: the CUDA backend over device/hip/hip_driver.h
  std::string why;  // one line for the INFO (or WARN) that says what was chosen and why
  bool warn = false;  // the user asked for something that cannot be had
};

// setting: ACCL_BACKEND ("auto", "host" or "cuda"; "hip" is chooseHipBackend's); driver: nullptr
// when none loaded, with driverWhy saying why; cudaBuilt: this library contains the CUDA backend.
BackendChoice chooseBackend(const std::string& setting, const cuda::DriverApi* driver,
                            const std::string& driverWhy, bool cudaBuilt);

// HIP: runtime is nullptr when no HIP runtime loads (runtimeWhy says why); devices is what it
// sees (devicesWhy says why none); hipBuilt: this build embeds the HIP kernels; asked:
// ACCL_BACKEND=hip (a failure is a WARN) rather than "auto" trying HIP after CUDA.
BackendChoice chooseHipBackend(const hip::HipApi* runtime, const std::string& runtimeWhy, int devices,
                               const std::string& devicesWhy, bool hipBuilt, bool asked = true);

// Whether the AMD GPU kernel driver is there (/dev/kfd): "auto" tries HIP only then.
bool amdGpuDriverPresent();

}  // namespace accl::dev
