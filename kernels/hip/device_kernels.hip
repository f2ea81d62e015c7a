// device_kernels.hip: the HIP build of kernels/device_kernels.h for AMD GPUs. clang compiles it
// device-only (-x hip --cuda-device-only -nogpuinc -nogpulib, one --offload-arch per target)
// into a clang offload bundle that libnccl.so.2 embeds (src/device/hip/kernels_blob.S) and a
// HIP runtime would load with hipModuleLoadData; nothing from ROCm is needed to build it.
// nccl.h must not pull in CUDA's headers here: their __global__ is not HIP's.
#define ACCL_NCCL_H_HOST_ONLY 1
#include "device_kernels.h"
