// Built instead of cuda_stream_handle.cc when torch or CUDA's headers lack CUDA: the extension
// then serves CPU tensors only, and a CUDA tensor gets a clear error.
#include <c10/util/Exception.h>

#include "streams.h"

namespace torch_accl {

bool builtWithCuda() { return false; }

cudaStream_t cudaStreamOf(const c10::Stream&) {
  TORCH_CHECK(false, "accl: this torch_accl was built without CUDA support (no CUDA build of torch or "
              "no cuda_runtime_api.h at build time); CUDA tensors are not served");
}

}  // namespace torch_accl
