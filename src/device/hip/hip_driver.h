// hip_driver.h: the HIP backend. It is the CUDA backend (device/cuda/cuda_backend.h: collectives
// as kernels on the caller's stream, a network proxy for peers the kernels cannot reach) driven
// through a driver table whose entries call ROCm's HIP runtime instead of libcuda: the execution
// model is written once, and what differs between the two runtimes is settled entry by entry
// here (contexts are devices, pointer kinds by ROCm major, IPC of allocation bases, coherent host
// memory for flags that kernels poll, HIP's attribute numbers and memcpy kinds, the offload bundle
// as the kernel image).
#pragma once
#include "device/cuda/driver_api.h"
#include "device/hip/hip_api.h"

namespace accl::dev::hip {

// The driver table over `api` (loaded, with devices: probeDevices said so), built once per
// process; its runtime is "HIP", its backends are named "hip" and its kernel image is the
// embedded offload bundle (kernel_bundle.h).
const cuda::DriverApi* hipDriverTable(const HipApi& api);

}  // namespace accl::dev::hip
