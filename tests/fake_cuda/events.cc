// events.cc: a Marker is one record of an event (done when its stream gets there); the event
// API keeps the latest marker, so cuStreamWaitEvent waits for the record current at the call.
#include <chrono>
#include "fake_cuda_test_api.h"
#include "internal.h"

namespace fakecuda {

void Marker::complete(CUresult result) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  std::lock_guard<std::mutex> g(mu_);
  done_ = true;
  result_ = result;
  doneAtMs_ = std::chrono::duration<double, std::milli>(now).count();
  cv_.notify_all();
}

double Marker::doneAtMs() {
  std::lock_guard<std::mutex> g(mu_);
  return doneAtMs_;
}

bool Marker::done() {
  std::lock_guard<std::mutex> g(mu_);
  return done_;
}

bool Marker::waitFor(int ms) {
  std::unique_lock<std::mutex> g(mu_);
  return cv_.wait_for(g, std::chrono::milliseconds(ms), [this] { return done_; });
}

CUresult Marker::wait() {
  std::unique_lock<std::mutex> g(mu_);
  cv_.wait(g, [this] { return done_; });
  return result_;
}

Registry<Event>& events() {
  static Registry<Event>* r = new Registry<Event>;
  return *r;
}

CUresult resolveEvent(CUevent h, Event** out) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (h == nullptr || !events().contains(h)) return CUDA_ERROR_INVALID_HANDLE;
  *out = reinterpret_cast<Event*>(h);
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

using namespace fakecuda;

FAKE_CUDA_API CUresult cuEventCreate(CUevent* phEvent, unsigned int flags) {
  noteCall("cuEventCreate");
  if (phEvent == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  auto* e = new Event;
  e->ctx = ctx;
  e->flags = flags;
  events().add(e);
  *phEvent = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

// Pending records still complete: the markers belong to the streams' operations.
FAKE_CUDA_API CUresult cuEventDestroy_v2(CUevent h) {
  noteCall("cuEventDestroy_v2");
  Event* e = nullptr;
  if (CUresult r = resolveEvent(h, &e)) return r;
  if (!events().remove(e)) return CUDA_ERROR_INVALID_HANDLE;
  delete e;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuEventRecord(CUevent h, CUstream hStream) {
  noteCall("cuEventRecord");
  Event* e = nullptr;
  Stream* s = nullptr;
  if (CUresult r = resolveEvent(h, &e)) return r;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  noteQueued(FAKE_CUDA_QUEUED_EVENT_RECORD);
  auto marker = std::make_shared<Marker>();
  std::shared_ptr<Graph> graph = s->captureGraph();
  const int id = graph ? captureRecord(s, graph, marker) : 0;
  FAKE_CUDA_TRACE("stream %p: record event %p%s", static_cast<void*>(s), static_cast<void*>(e), graph ? " (captured)" : "");
  {
    std::lock_guard<std::mutex> ge(e->mu);
    e->last = marker;
    e->capturedIn = graph;
    e->capturedId = id;
  }
  if (!graph) {
    s->enqueue([marker](CUresult sticky) {
      marker->complete(sticky);
      return sticky;
    });
  }
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuEventQuery(CUevent h) {
  noteCall("cuEventQuery");
  Event* e = nullptr;
  if (CUresult r = resolveEvent(h, &e)) return r;
  std::shared_ptr<Marker> m;
  {
    std::lock_guard<std::mutex> g(e->mu);
    if (e->capturedIn && e->capturedIn->open) return CUDA_ERROR_CAPTURED_EVENT;
    m = e->last;
  }
  if (!m) return CUDA_SUCCESS;
  if (!m->done()) return CUDA_ERROR_NOT_READY;
  return m->wait();
}

FAKE_CUDA_API CUresult cuEventSynchronize(CUevent h) {
  noteCall("cuEventSynchronize");
  Event* e = nullptr;
  if (CUresult r = resolveEvent(h, &e)) return r;
  std::shared_ptr<Marker> m;
  {
    std::lock_guard<std::mutex> g(e->mu);
    if (e->capturedIn && e->capturedIn->open) return CUDA_ERROR_CAPTURED_EVENT;
    m = e->last;
  }
  return m ? m->wait() : CUDA_SUCCESS;
}

// The record current now (a later record does not move this wait); never recorded: no wait.
FAKE_CUDA_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent h, unsigned int flags) {
  noteCall("cuStreamWaitEvent");
  Event* e = nullptr;
  Stream* s = nullptr;
  if (CUresult r = resolveEvent(h, &e)) return r;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  if (flags != 0 && flags != CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Marker> m;
  std::shared_ptr<Graph> capturedIn;
  int capturedId = 0;
  {
    std::lock_guard<std::mutex> g(e->mu);
    m = e->last;
    capturedIn = e->capturedIn;
    capturedId = e->capturedId;
  }
  noteQueued(FAKE_CUDA_QUEUED_STREAM_WAIT);
  FAKE_CUDA_TRACE("stream %p: wait event %p%s", static_cast<void*>(s), static_cast<void*>(e), m ? "" : " (never recorded)");
  if (!m) return CUDA_SUCCESS;
  std::shared_ptr<Graph> own = s->captureGraph();
  if (!(capturedIn && capturedIn->open)) capturedIn = nullptr;
  if (own && own != capturedIn && flags != CU_EVENT_WAIT_EXTERNAL) {
    // A capture may not depend on work outside it (real driver: the same error).
    report("cuStreamWaitEvent: a capturing stream waits on an event recorded outside its capture");
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  if (capturedIn) {
    captureWait(s, capturedIn, capturedId);  // joins the capture first when s is not in it (fork)
    return CUDA_SUCCESS;
  }
  s->enqueue([m](CUresult sticky) {
    if (sticky == CUDA_SUCCESS) m->wait();
    return sticky;
  });
  return CUDA_SUCCESS;
}

// Both events timing-enabled and recorded; NOT_READY until both records completed.
static CUresult elapsed(float* ms, CUevent hStart, CUevent hEnd) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Event *start = nullptr, *end = nullptr;
  if (CUresult r = resolveEvent(hStart, &start)) return r;
  if (CUresult r = resolveEvent(hEnd, &end)) return r;
  if ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<Marker> a, b;
  {
    std::lock_guard<std::mutex> g(start->mu);
    a = start->last;
  }
  {
    std::lock_guard<std::mutex> g(end->mu);
    b = end->last;
  }
  if (!a || !b) return CUDA_ERROR_INVALID_HANDLE;
  if (!a->done() || !b->done()) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(b->doneAtMs() - a->doneAtMs());
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuEventElapsedTime_v2(float* ms, CUevent hStart, CUevent hEnd) { noteCall("cuEventElapsedTime_v2"); return elapsed(ms, hStart, hEnd); }
#undef cuEventElapsedTime
FAKE_CUDA_API CUresult cuEventElapsedTime(float* ms, CUevent hStart, CUevent hEnd) { noteCall("cuEventElapsedTime"); return elapsed(ms, hStart, hEnd); }
