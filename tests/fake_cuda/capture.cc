// capture.cc: stream capture into graphs, one stream at a time. Between cuStreamBeginCapture
// and cuStreamEndCapture the stream's operations are recorded, not run; an instantiated graph
// replays them in order on the launch stream, any number of times. Not emulated: fork/join
// capture across streams, graph memory nodes (cuMemAllocAsync while capturing), relaxed and
// thread-local capture modes (every mode behaves as global for the capturing stream).
#include <map>
#include "internal.h"

namespace fakecuda {
namespace {

struct GraphExec {
  std::vector<Op> ops;
};

struct GraphStore {
  std::mutex mu;
  std::map<Graph*, std::shared_ptr<Graph>> graphs;
};
GraphStore& store() {
  static GraphStore* s = new GraphStore;
  return *s;
}
Registry<GraphExec>& execs() {
  static Registry<GraphExec>* r = new Registry<GraphExec>;
  return *r;
}

std::shared_ptr<Graph> findGraph(CUgraph h) {
  std::lock_guard<std::mutex> g(store().mu);
  auto it = store().graphs.find(reinterpret_cast<Graph*>(h));
  return it == store().graphs.end() ? nullptr : it->second;
}

bool isDefault(CUstream h) { return h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD; }

}  // namespace

bool captureIfActive(Stream* s, const Op& op) {
  std::lock_guard<std::mutex> g(s->captureMu);
  if (s->captureStatus == CU_STREAM_CAPTURE_STATUS_NONE) return false;
  if (s->captureStatus == CU_STREAM_CAPTURE_STATUS_ACTIVE) s->capture->ops.push_back(op);
  return true;  // an invalidated capture drops work until cuStreamEndCapture
}

}  // namespace fakecuda

using namespace fakecuda;

FAKE_CUDA_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  if (isDefault(hStream)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot capture
  std::lock_guard<std::mutex> g(s->captureMu);
  if (s->captureStatus != CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
  s->capture = std::make_shared<Graph>();
  s->captureStatus = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  if (phGraph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  std::shared_ptr<Graph> graph;
  CUstreamCaptureStatus status;
  {
    std::lock_guard<std::mutex> g(s->captureMu);
    if (s->captureStatus == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
    graph = std::move(s->capture);
    status = s->captureStatus;
    s->captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
  }
  graph->open = false;
  *phGraph = nullptr;
  if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  std::lock_guard<std::mutex> g(store().mu);
  store().graphs[graph.get()] = graph;
  *phGraph = reinterpret_cast<CUgraph>(graph.get());
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  if (captureStatus == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  std::lock_guard<std::mutex> g(s->captureMu);
  *captureStatus = s->captureStatus;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuGraphDestroy(CUgraph hGraph) {
  std::lock_guard<std::mutex> g(store().mu);
  return store().graphs.erase(reinterpret_cast<Graph*>(hGraph)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_CUDA_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) {
  (void)flags;
  if (phGraphExec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Graph> graph = findGraph(hGraph);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  auto* exec = new GraphExec{graph->ops};
  execs().add(exec);
  *phGraphExec = reinterpret_cast<CUgraphExec>(exec);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  if (!execs().contains(hGraphExec)) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  for (const Op& op : reinterpret_cast<GraphExec*>(hGraphExec)->ops) s->enqueue(op);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  auto* exec = reinterpret_cast<GraphExec*>(hGraphExec);
  if (!execs().remove(exec)) return CUDA_ERROR_INVALID_VALUE;
  delete exec;
  return CUDA_SUCCESS;
}
