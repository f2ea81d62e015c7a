// The one place that needs CUDA's headers: a c10::Stream's raw cudaStream_t (libc10_cuda).
#include <c10/cuda/CUDAStream.h>

#include "streams.h"

namespace torch_accl {

bool builtWithCuda() { return true; }

cudaStream_t cudaStreamOf(const c10::Stream& s) { return c10::cuda::CUDAStream(s).stream(); }

}  // namespace torch_accl
