// device_kernels.cu: the CUDA build of kernels/device_kernels.h (nvcc, a fatbin for sm_80,
// sm_90, sm_100 + PTX; ACCL_CUDA_ARCHS narrows) that the backend loads at run time with
// cuModuleLoadData, so libnccl.so.2 needs no CUDA to load.
#include "device_kernels.h"
