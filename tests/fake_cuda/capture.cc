// capture.cc: stream capture into graphs. Between cuStreamBeginCapture and cuStreamEndCapture
// the stream's operations are recorded, not run; a stream that waits on an event recorded in
// the capture joins it (fork/join), and its operations are recorded into the same list, in
// call order. An instantiated graph replays the list in order on the launch stream, any number
// of times. Not emulated: graph memory nodes (cuMemAllocAsync while capturing), the check that
// forked streams joined back before cuStreamEndCapture (they simply leave the capture), and
// the difference between capture modes.
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

bool captureIfActive(Stream* s, const std::vector<Op>& ops) {
  std::shared_ptr<Graph> graph = s->captureGraph();
  if (!graph) return false;
  std::lock_guard<std::mutex> g(graph->mu);
  if (!graph->invalidated) graph->ops.insert(graph->ops.end(), ops.begin(), ops.end());
  return true;  // an invalidated capture drops work until cuStreamEndCapture
}

void joinCapture(Stream* s, const std::shared_ptr<Graph>& graph) {
  {
    std::lock_guard<std::mutex> g(s->captureMu);
    s->capture = graph;
  }
  std::lock_guard<std::mutex> g(graph->mu);
  graph->members.push_back(s);
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
  if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  s->capture = std::make_shared<Graph>();
  s->capture->members.push_back(s);
  return CUDA_SUCCESS;
}

// Must be called on the stream that began the capture; every joined stream leaves it too.
FAKE_CUDA_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  if (phGraph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  std::shared_ptr<Graph> graph = s->captureGraph();
  if (!graph) return CUDA_ERROR_ILLEGAL_STATE;
  std::vector<Stream*> members;
  {
    std::lock_guard<std::mutex> g(graph->mu);
    if (graph->members.front() != s) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    members = graph->members;
    graph->open = false;
  }
  for (Stream* m : members) {
    std::lock_guard<std::mutex> g(m->captureMu);
    if (m->capture == graph) m->capture.reset();
  }
  *phGraph = nullptr;
  if (graph->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  std::lock_guard<std::mutex> g(store().mu);
  store().graphs[graph.get()] = graph;
  *phGraph = reinterpret_cast<CUgraph>(graph.get());
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  if (captureStatus == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  *captureStatus = s->captureStatus();
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuGraphDestroy(CUgraph hGraph) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> g(store().mu);
  return store().graphs.erase(reinterpret_cast<Graph*>(hGraph)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_CUDA_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) {
  (void)flags;
  if (phGraphExec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  std::shared_ptr<Graph> graph = findGraph(hGraph);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  auto* exec = new GraphExec;
  {
    std::lock_guard<std::mutex> g(graph->mu);
    exec->ops = graph->ops;
  }
  execs().add(exec);
  *phGraphExec = reinterpret_cast<CUgraphExec>(exec);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  if (!execs().contains(hGraphExec)) return CUDA_ERROR_INVALID_VALUE;
  s->enqueueAll(reinterpret_cast<GraphExec*>(hGraphExec)->ops);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  auto* exec = reinterpret_cast<GraphExec*>(hGraphExec);
  if (!execs().remove(exec)) return CUDA_ERROR_INVALID_VALUE;
  delete exec;
  return CUDA_SUCCESS;
}
