// module.cc: the Python module torch_accl._C.
// torch/python.h, not torch/extension.h: pybind11 and torch's holder types are all this file
// needs, and the whole C++ frontend that extension.h adds costs half the extension's build.
#include <torch/python.h>

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
  // Without the GIL: the constructor waits on the store for the other ranks.
  m.def("create_backend", &torch_accl::createBackend, pybind11::call_guard<pybind11::gil_scoped_release>(),
        "create an accl c10d Backend");
}
