#include "device/hip/kernel_bundle.h"

extern "C" {
// kernels_blob.S: the bundle built by clang, between these two symbols.
extern const char accl_hip_bundle_begin[];
extern const char accl_hip_bundle_end[];
}

namespace accl::dev::hip {

const void* embeddedKernels(size_t* bytes) {
  *bytes = static_cast<size_t>(accl_hip_bundle_end - accl_hip_bundle_begin);
  return accl_hip_bundle_begin;
}

}  // namespace accl::dev::hip
