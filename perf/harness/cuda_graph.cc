#include "cuda_graph.h"

#include <dlfcn.h>

namespace accl::perf {
namespace {

using dev::cuda::CUresult;
using dev::cuda::kSuccess;
using Graph = void*;      // CUgraph
using GraphExec = void*;  // CUgraphExec

struct GraphApi {
  CUresult (*beginCapture)(cudaStream_t, int mode) = nullptr;                    // cuStreamBeginCapture_v2
  CUresult (*endCapture)(cudaStream_t, Graph*) = nullptr;                        // cuStreamEndCapture
  CUresult (*instantiate)(GraphExec*, Graph, unsigned long long flags) = nullptr;  // cuGraphInstantiateWithFlags
  CUresult (*launch)(GraphExec, cudaStream_t) = nullptr;                         // cuGraphLaunch
  CUresult (*execDestroy)(GraphExec) = nullptr;                                  // cuGraphExecDestroy
  CUresult (*destroy)(Graph) = nullptr;                                          // cuGraphDestroy
};

template <class Fn>
void bind(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*out && missing->empty()) *missing = name;
}

// Loaded once; nullptr with the reason when the driver the session opened lacks an entry point.
const GraphApi* graphApi(std::string* why) {
  static std::string missing;
  static const GraphApi* const api = []() -> const GraphApi* {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);  // the session's driver, never dlclose'd
    if (!lib) {
      missing = "libcuda.so.1 is not loaded";
      return nullptr;
    }
    static GraphApi table;
    bind(lib, "cuStreamBeginCapture_v2", &table.beginCapture, &missing);
    bind(lib, "cuStreamEndCapture", &table.endCapture, &missing);
    bind(lib, "cuGraphInstantiateWithFlags", &table.instantiate, &missing);
    bind(lib, "cuGraphLaunch", &table.launch, &missing);
    bind(lib, "cuGraphExecDestroy", &table.execDestroy, &missing);
    bind(lib, "cuGraphDestroy", &table.destroy, &missing);
    if (!missing.empty()) {
      missing = "the CUDA driver has no " + missing;
      return nullptr;
    }
    return &table;
  }();
  if (!api) *why = missing;
  return api;
}

}  // namespace

bool StreamGraphs::available(std::string* why) { return graphApi(why) != nullptr; }

StreamGraphs::~StreamGraphs() {
  std::string ignored;
  const GraphApi* api = graphApi(&ignored);
  if (!api) return;
  for (void* e : execs_)
    if (e) api->execDestroy(e);
  for (void* g : graphs_)
    if (g) api->destroy(g);
}

bool StreamGraphs::begin(const std::vector<cudaStream_t>& streams, CaptureMode mode, std::string* error) {
  if (!cuda_) {
    *error = "CUDA graphs need device buffers and CUDA streams";
    return false;
  }
  const GraphApi* api = graphApi(error);
  if (!api) return false;
  for (cudaStream_t s : streams) {
    if (const CUresult r = api->beginCapture(s, static_cast<int>(mode)); r != kSuccess) {
      *error = "cuStreamBeginCapture: " + cudaErrorText(*cuda_, r);
      return false;
    }
    streams_.push_back(s);
  }
  return true;
}

bool StreamGraphs::end(std::string* error) {
  const GraphApi* api = graphApi(error);
  if (!api) return false;
  bool ok = true;
  // Every capture begun is ended, also after a failure, so the streams stay usable.
  for (cudaStream_t s : streams_) {
    Graph g = nullptr;
    const CUresult r = api->endCapture(s, &g);
    graphs_.push_back(g);
    if (r != kSuccess && ok) {
      *error = "cuStreamEndCapture: " + cudaErrorText(*cuda_, r);
      ok = false;
    }
  }
  for (size_t i = 0; ok && i < graphs_.size(); ++i) {
    GraphExec e = nullptr;
    const CUresult r = api->instantiate(&e, graphs_[i], 0);
    execs_.push_back(e);
    if (r != kSuccess) {
      *error = "cuGraphInstantiate: " + cudaErrorText(*cuda_, r);
      ok = false;
    }
  }
  return ok;
}

bool StreamGraphs::launch(std::string* error) {
  const GraphApi* api = graphApi(error);
  if (!api) return false;
  for (size_t i = 0; i < execs_.size(); ++i) {
    if (const CUresult r = api->launch(execs_[i], streams_[i]); r != kSuccess) {
      *error = "cuGraphLaunch: " + cudaErrorText(*cuda_, r);
      return false;
    }
  }
  return true;
}

}  // namespace accl::perf
