#include "library.h"

#include <dlfcn.h>

#include <mutex>

#include <c10/util/Exception.h>

namespace torch_accl {
namespace {
Api g_api;
std::mutex g_apiMu;
}  // namespace

void loadLibrary(const std::string& path) {
  std::lock_guard<std::mutex> lk(g_apiMu);
  if (g_api.handle) {
    TORCH_CHECK(g_api.path == path, "torch_accl: already loaded ", g_api.path, ", not ", path);
    return;
  }
  TORCH_CHECK(!path.empty() && path[0] == '/', "torch_accl: library path must be absolute: ", path);
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  TORCH_CHECK(h, "torch_accl: cannot load ACCL's libnccl.so.2 from ", path, ": ", dlerror(),
              " (build it with `make`, or set ACCL_LIBNCCL to its absolute path)");
  Api a;
  a.handle = h;
  a.path = path;
#define TORCH_ACCL_FN(name)                                                            \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(h, #name));                        \
  TORCH_CHECK(a.name, "torch_accl: ", path, " lacks ", #name, " - is it ACCL's libnccl?");
  TORCH_ACCL_FNS(TORCH_ACCL_FN)
#undef TORCH_ACCL_FN
  g_api = a;
}

const Api& api() {
  TORCH_CHECK(g_api.handle, "torch_accl: library not loaded (import torch_accl)");
  return g_api;
}

std::string libraryOf(void* fn) {
  Dl_info info{};
  if (dladdr(fn, &info) && info.dli_fname) return info.dli_fname;
  return "?";
}

}  // namespace torch_accl
