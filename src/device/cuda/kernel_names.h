// kernel_names.h: every entry point of kernels/device_kernels.h the CUDA backend can launch.
// The backend resolves all of them when it sets a device up (CudaDevice::init), never during
// a collective: since CUDA 12.2 modules load lazily, and the first lookup of a kernel may
// synchronise the context, which deadlocks while a user's stream waits for the collective.
#pragma once
#include <string>
#include <vector>
#include "nccl.h"

namespace accl::dev::cuda {

// `stem` + the datatype's name as dev::typeName spells it ("accl_scale_float32"); empty for an
// invalid datatype.
std::string kernelName(const char* stem, ncclDataType_t t);
// Every kernel the backend resolves at set-up; the LL kernels only where they are built (CUDA,
// not clang's HIP bundle: kernels/ll_kernel.h).
std::vector<std::string> libraryKernelNames(bool withLl = true);

}  // namespace accl::dev::cuda
