// module_loading.cc: CUDA_MODULE_LOADING. Since CUDA 12.2 modules load lazily by default: a
// kernel is loaded at its first lookup (cuModuleGetFunction), and loading may synchronize the
// context, i.e. wait until every stream of it is idle. A program whose streams wait for its own
// later host calls (a stream waiting at a gate the host opens after looking up a kernel) then
// hangs on a GPU. The fake always synchronizes at a kernel's first lookup in a context under
// LAZY (unset, or any value but EAGER); it waits at most FAKE_CUDA_LAZY_LOAD_TIMEOUT_MS
// (default 5000), then writes a line naming the kernel and the busy stream and fails the lookup
// with CUDA_ERROR_ILLEGAL_STATE instead of hanging. CUDA_MODULE_LOADING=EAGER loads everything
// with the module: lookups never synchronize. Both settings are read once per process.
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include "internal.h"

namespace fakecuda {
namespace {

bool lazy() {
  static const bool v = [] {
    const char* env = std::getenv("CUDA_MODULE_LOADING");
    return !(env && std::strcmp(env, "EAGER") == 0);
  }();
  return v;
}

int timeoutMs() {
  static const int v = [] {
    const char* env = std::getenv("FAKE_CUDA_LAZY_LOAD_TIMEOUT_MS");
    const int ms = env && *env ? std::atoi(env) : 5000;
    return ms > 0 ? ms : 5000;
  }();
  return v;
}

struct Loaded {
  std::mutex mu;
  std::set<std::pair<Context*, std::string>> kernels;
};
Loaded& loaded() {
  static Loaded* l = new Loaded;
  return *l;
}

}  // namespace

CUresult loadFunction(Context* ctx, const char* name) {
  if (!lazy()) return CUDA_SUCCESS;
  {
    std::lock_guard<std::mutex> g(loaded().mu);
    if (loaded().kernels.count({ctx, name})) return CUDA_SUCCESS;
  }
  if (Stream* busy = drainContextFor(ctx, timeoutMs())) {
    report("cuModuleGetFunction(%s): lazy module loading (CUDA_MODULE_LOADING unset or LAZY, the default since "
           "CUDA 12.2) synchronizes the context at a kernel's first lookup, and stream %p is still busy after %d ms; "
           "on a GPU this hangs if that stream waits for this thread. Look kernels up at init, or set "
           "CUDA_MODULE_LOADING=EAGER. Failing with CUDA_ERROR_ILLEGAL_STATE",
           name, static_cast<void*>(busy), timeoutMs());
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  FAKE_CUDA_TRACE("cuModuleGetFunction(%s): loaded lazily (the context was idle)", name);
  std::lock_guard<std::mutex> g(loaded().mu);
  loaded().kernels.insert({ctx, name});
  return CUDA_SUCCESS;
}

}  // namespace fakecuda
