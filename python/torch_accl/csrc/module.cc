// module.cc: the Python module torch_accl._C.
// torch/python.h, not torch/extension.h: pybind11 and torch's holder types are all this file
// needs, and the whole C++ frontend that extension.h adds costs half the extension's build.
#include <cstdint>
#include <string>

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
  m.def(
      "abort_coalescing",
      [](const c10::intrusive_ptr<c10d::Backend>& backend, const std::string& why) -> int64_t {
        auto* accl = dynamic_cast<torch_accl::AcclBackend*>(backend.get());
        return accl ? static_cast<int64_t>(accl->abortCoalescing(why)) : -1;
      },
      "leave a coalescing block that raised, failing its unstarted ops; -1: not an accl backend");
  // Without the GIL: the constructor waits on the store for the other ranks.
  m.def("create_backend", &torch_accl::createBackend, pybind11::call_guard<pybind11::gil_scoped_release>(),
        "create an accl c10d Backend");
}
