// kernel_bundle.h: the HIP kernels (kernels/hip/device_kernels.hip) as libnccl.so.2 carries them:
// a clang offload bundle with one code object per AMD target, for hipModuleLoadData.
#pragma once
#include <cstddef>

namespace accl::dev::hip {

// The bundle's bytes; *bytes is 0 when this build has no HIP kernels (clang could not build them).
const void* embeddedKernels(size_t* bytes);

}  // namespace accl::dev::hip
