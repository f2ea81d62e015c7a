// capture.cc: stream capture into graphs. Between cuStreamBeginCapture and cuStreamEndCapture
// the stream's operations are recorded, not run. A stream that waits on an event recorded in
// the capture joins it (fork) and records into a branch of its own; event records and waits
// inside the capture become edges between branches. cuGraphLaunch runs branch 0 on the launch
// stream and every other branch concurrently on a helper stream of the executable graph, with
// fresh markers for the edges at each launch, so replays stay ordered and branches may wait on
// each other (through events or through memory) as on a GPU; later work on the launch stream
// waits for all branches. The capture mode decides which threads may not make unsafe calls
// meanwhile (capture_modes.cc); a capture not begun RELAXED must end on the thread that began
// it. Not emulated: graph memory nodes (cuMemAllocAsync while capturing), the check that forked
// branches joined back before cuStreamEndCapture, and launching a multi-branch graph into
// another capture.
#include <map>
#include "internal.h"

namespace fakecuda {
namespace {

struct GraphExec {
  std::vector<std::vector<Node>> branches;
  int records = 0;
  std::mutex mu;
  std::vector<Stream*> helpers;  // one per branch after the first, made at the first launch
  ~GraphExec() {
    for (Stream* h : helpers) delete h;  // drains first
  }
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

bool isLegacy(CUstream h) { return h == nullptr || h == CU_STREAM_LEGACY; }

// The branch of s in graph (caller holds graph->mu); s joins when it is not a member yet.
std::vector<Node>& branchOf(Graph& graph, Stream* s) {
  for (size_t i = 0; i < graph.members.size(); i++)
    if (graph.members[i] == s) return graph.branches[i];
  graph.members.push_back(s);
  graph.branches.emplace_back();
  return graph.branches.back();
}

Op completeOp(std::shared_ptr<Marker> m) {
  return [m](CUresult sticky) {
    m->complete(sticky);
    return sticky;
  };
}

// Waits for m; `propagate`: a failure on m's side (a branch's sticky error) becomes this stream's.
Op waitOp(std::shared_ptr<Marker> m, bool propagate) {
  return [m, propagate](CUresult sticky) {
    if (sticky != CUDA_SUCCESS) return sticky;
    CUresult other = m->wait();
    return propagate ? other : CUDA_SUCCESS;
  };
}

std::vector<Op> instantiate(const std::vector<Node>& branch, const std::vector<std::shared_ptr<Marker>>& markers) {
  std::vector<Op> ops;
  for (const Node& n : branch) {
    if (n.kind == Node::Work) ops.push_back(n.op);
    else if (n.kind == Node::Record) ops.push_back(completeOp(markers[n.id]));
    else ops.push_back(waitOp(markers[n.id], false));
  }
  return ops;
}

}  // namespace

bool captureIfActive(Stream* s, const std::vector<Op>& ops) {
  std::shared_ptr<Graph> graph = s->captureGraph();
  if (!graph) return false;
  std::lock_guard<std::mutex> g(graph->mu);
  if (graph->invalidated) return true;  // an invalidated capture drops work until cuStreamEndCapture
  std::vector<Node>& branch = branchOf(*graph, s);
  for (const Op& op : ops) branch.push_back({Node::Work, op, 0});
  return true;
}

int captureRecord(Stream* s, const std::shared_ptr<Graph>& graph, const std::shared_ptr<Marker>& eventMarker) {
  std::lock_guard<std::mutex> g(graph->mu);
  const int id = graph->records++;
  branchOf(*graph, s).push_back({Node::Record, nullptr, id});
  graph->eventMarkers.push_back(eventMarker);
  return id;
}

void captureWait(Stream* s, const std::shared_ptr<Graph>& graph, int id) {
  {
    std::lock_guard<std::mutex> g(s->captureMu);
    s->capture = graph;  // already so, or s joins here (fork)
  }
  std::lock_guard<std::mutex> g(graph->mu);
  branchOf(*graph, s).push_back({Node::Wait, nullptr, id});
}

}  // namespace fakecuda

using namespace fakecuda;

FAKE_CUDA_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  noteCall("cuStreamBeginCapture_v2");
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  if (isLegacy(hStream)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot capture
  std::lock_guard<std::mutex> g(s->captureMu);
  if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  s->capture = std::make_shared<Graph>();
  s->capture->mode = mode;
  s->capture->owner = std::this_thread::get_id();
  captureBegan(s->capture);
  FAKE_CUDA_TRACE("stream %p: begin capture into graph %p", static_cast<void*>(s), static_cast<void*>(s->capture.get()));
  s->capture->members.push_back(s);
  s->capture->branches.emplace_back();
  return CUDA_SUCCESS;
}

// Must be called on the stream that began the capture; every joined stream leaves it too.
FAKE_CUDA_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  noteCall("cuStreamEndCapture");
  if (phGraph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  std::shared_ptr<Graph> graph = s->captureGraph();
  if (!graph) return CUDA_ERROR_ILLEGAL_STATE;
  std::vector<Stream*> members;
  std::vector<std::shared_ptr<Marker>> eventMarkers;
  {
    std::lock_guard<std::mutex> g(graph->mu);
    if (graph->members.front() != s) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    if (graph->mode != CU_STREAM_CAPTURE_MODE_RELAXED && graph->owner != std::this_thread::get_id()) {
      report("cuStreamEndCapture: a capture not begun in relaxed mode ends on another thread than the one that "
             "began it (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)");
      return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    members = graph->members;
    eventMarkers.swap(graph->eventMarkers);
    graph->open = false;
  }
  captureEnded(graph.get());
  for (Stream* m : members) {
    std::lock_guard<std::mutex> g(m->captureMu);
    if (m->capture == graph) m->capture.reset();
  }
  // Events last recorded inside the capture are complete for host queries afterwards.
  for (auto& m : eventMarkers) m->complete(CUDA_SUCCESS);
  *phGraph = nullptr;
  if (graph->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  std::lock_guard<std::mutex> g(store().mu);
  store().graphs[graph.get()] = graph;
  *phGraph = reinterpret_cast<CUgraph>(graph.get());
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  noteCall("cuStreamIsCapturing");
  if (captureStatus == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  *captureStatus = s->captureStatus();
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuGraphDestroy(CUgraph hGraph) {
  noteCall("cuGraphDestroy");
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> g(store().mu);
  return store().graphs.erase(reinterpret_cast<Graph*>(hGraph)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_CUDA_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) {
  noteCall("cuGraphInstantiateWithFlags");
  (void)flags;
  if (phGraphExec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  std::shared_ptr<Graph> graph = findGraph(hGraph);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  auto* exec = new GraphExec;
  {
    std::lock_guard<std::mutex> g(graph->mu);
    exec->branches = graph->branches;
    exec->records = graph->records;
  }
  execs().add(exec);
  *phGraphExec = reinterpret_cast<CUgraphExec>(exec);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  noteCall("cuGraphLaunch");
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  if (!execs().contains(hGraphExec)) return CUDA_ERROR_INVALID_VALUE;
  auto* exec = reinterpret_cast<GraphExec*>(hGraphExec);
  std::lock_guard<std::mutex> g(exec->mu);
  const size_t extra = exec->branches.size() - 1;
  if (extra > 0 && s->captureGraph()) {
    report("cuGraphLaunch: a graph with %zu forked branches launched into a capture is not emulated", extra);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  FAKE_CUDA_TRACE("stream %p: launch graph exec %p (%zu branches)", static_cast<void*>(s), static_cast<void*>(exec),
                  exec->branches.size());
  std::vector<std::shared_ptr<Marker>> markers(exec->records);
  for (auto& m : markers) m = std::make_shared<Marker>();
  if (extra == 0) {
    s->enqueueAll(instantiate(exec->branches[0], markers));
    return CUDA_SUCCESS;
  }
  Context* ctx = s->ctx();
  if (ctx == nullptr) currentContext(&ctx);
  while (exec->helpers.size() < extra) exec->helpers.push_back(new Stream(ctx, CU_STREAM_NON_BLOCKING));
  // Branches start once the launch stream gets here; the launch stream goes on once all ended.
  auto start = std::make_shared<Marker>();
  std::vector<Op> main = {completeOp(start)};
  for (size_t b = 1; b <= extra; b++) {
    auto end = std::make_shared<Marker>();
    std::vector<Op> ops = {waitOp(start, true)};
    for (Op& op : instantiate(exec->branches[b], markers)) ops.push_back(std::move(op));
    ops.push_back(completeOp(end));
    exec->helpers[b - 1]->enqueueAll(ops);
    main.push_back(waitOp(end, true));  // appended after branch 0 below
  }
  std::vector<Op> ops = {main.front()};
  for (Op& op : instantiate(exec->branches[0], markers)) ops.push_back(std::move(op));
  ops.insert(ops.end(), main.begin() + 1, main.end());
  s->enqueueAll(ops);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  noteCall("cuGraphExecDestroy");
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  auto* exec = reinterpret_cast<GraphExec*>(hGraphExec);
  if (!execs().remove(exec)) return CUDA_ERROR_INVALID_VALUE;
  // Pending launches still run: the helpers drain before they go (in the background).
  std::thread([exec] { delete exec; }).detach();
  return CUDA_SUCCESS;
}
