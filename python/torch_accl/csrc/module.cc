// module.cc: the Python module torch_accl._C.
#include <torch/extension.h>

#include "backend.h"
#include "library.h"
#include "streams.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("load_library", &torch_accl::loadLibrary, "dlopen ACCL's libnccl.so.2 by absolute path");
  m.def("accl_version", [] { return std::string(torch_accl::api().ncclAcclVersionString()); });
  m.def("library_path", [] {
    return torch_accl::libraryOf(reinterpret_cast<void*>(torch_accl::api().ncclAllReduce));
  });
  m.def("built_with_cuda", &torch_accl::builtWithCuda, "whether this build serves CUDA tensors");
  m.def("create_backend", &torch_accl::createBackend, "create an accl c10d Backend");
}
