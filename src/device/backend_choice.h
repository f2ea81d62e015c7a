// backend_choice.h: which backend a process uses, decided once from ACCL_BACKEND, the CUDA
// driver (if one loads) and what this build contains. Separate from the loading so tests can
// decide with a fake driver.
#pragma once
#include <string>
#include "device/cuda/driver_api.h"

namespace accl::dev {

struct BackendChoice {
  bool cuda = false;
  std::string why;  // one line for the INFO (or WARN) that says what was chosen and why
  bool warn = false;  // the user asked for something that cannot be had
};

// setting: ACCL_BACKEND ("auto", "host" or "cuda"); driver: nullptr when none loaded, with
// driverWhy saying why; cudaBuilt: this library contains the CUDA backend.
BackendChoice chooseBackend(const std::string& setting, const cuda::DriverApi* driver,
                            const std::string& driverWhy, bool cudaBuilt);

}  // namespace accl::dev
