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
  std::string why;  // one line for the INFO (or WARN) that says what was chosen and why
  bool warn = false;  // the user asked for something that cannot be had
};

// setting: ACCL_BACKEND ("auto", "host" or "cuda"; "hip" is chooseHipBackend's); driver: nullptr
// when none loaded, with driverWhy saying why; cudaBuilt: this library contains the CUDA backend.
BackendChoice chooseBackend(const std::string& setting, const cuda::DriverApi* driver,
                            const std::string& driverWhy, bool cudaBuilt);

// ACCL_BACKEND=hip: runtime is nullptr when no HIP runtime loads (runtimeWhy says why); devices
// is what it sees (devicesWhy says why none); hipBuilt: this build embeds the HIP kernels. The
// answer is the host backend for now, with a WARN saying what stands in the way: collectives on
// HIP devices need the execution model of kernels on the caller's stream (docs/backends.md).
BackendChoice chooseHipBackend(const hip::HipApi* runtime, const std::string& runtimeWhy, int devices,
                               const std::string& devicesWhy, bool hipBuilt);

}  // namespace accl::dev
