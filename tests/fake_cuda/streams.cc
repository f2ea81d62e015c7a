// streams.cc: a stream is an in-order queue of operations run by its own worker thread, which
// also waits for the operation's turn on the stream's hardware queue (hw_queues.cc). The
// first operation that fails leaves its error on the stream (sticky, like a GPU fault: later
// work does not run and later synchronize/query calls report it). The NULL stream and
// CU_STREAM_LEGACY are the legacy default stream of the device's context (one per device, as
// on the GPU: ranks on two devices never share one), with its implicit synchronization: work
// queued on it waits for all work queued before on the context's blocking streams (created
// without CU_STREAM_NON_BLOCKING, per-thread default streams included), and work queued later
// on a blocking stream waits for the legacy stream's work queued before. CU_STREAM_PER_THREAD
// is each thread's own blocking stream, not the legacy one.
#include <atomic>
#include <utility>
#include "internal.h"

namespace fakecuda {

namespace {
unsigned long long nextStreamId() {
  static std::atomic<unsigned long long> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

Op work(std::function<CUresult()> body) {
  return [body = std::move(body)](CUresult sticky) { return sticky != CUDA_SUCCESS ? sticky : body(); };
}

Stream::Stream(Context* ctx, unsigned flags, bool legacy)
    : ctx_(ctx), flags_(flags), legacy_(legacy), id_(nextStreamId()), hwq_(assignHwQueue(ctx, legacy)), worker_([this] { run(); }) {
  if (hwq_) FAKE_CUDA_TRACE("stream %p: hardware queue %d of %d", static_cast<void*>(this), hwq_->index, hwq_->of);
}

// Drains the queue first: destroying a stream lets its pending work finish.
Stream::~Stream() { retire(); }

void Stream::retire() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
}

void Stream::enqueue(Op op) { enqueueAll({std::move(op)}); }

void Stream::enqueueAll(const std::vector<Op>& ops) {
  if (captureIfActive(this, ops)) return;
  std::vector<Op> all = implicitWaits();
  if (all.empty()) return append(ops);
  all.insert(all.end(), ops.begin(), ops.end());
  append(all);
}

namespace {
Stream& defaultStream(Context* ctx);
}

bool Stream::idle() {
  std::lock_guard<std::mutex> g(mu_);
  return done_ == enqueued_;
}

std::shared_ptr<Marker> Stream::markNow() {
  auto m = std::make_shared<Marker>();
  append({[m](CUresult sticky) {
    m->complete(sticky);
    return sticky;
  }});
  return m;
}

std::vector<Op> Stream::implicitWaits() {
  std::vector<Op> waits;
  if (ctx_ == nullptr || !blocking()) return waits;
  // Called without this stream's lock held: the other stream may be doing the same to us.
  auto waitFor = [&](Stream* other) {
    if (other == this || other->idle()) return;
    std::shared_ptr<Marker> m = other->markNow();
    waits.push_back([m, self = this, other](CUresult sticky) {
      if (sticky != CUDA_SUCCESS) return sticky;
      if (!m->waitFor(5000)) {
        report("stream %p%s has waited 5 s for stream %p%s: the legacy default stream (NULL, CU_STREAM_LEGACY, "
               "and every synchronous cuMemcpy/cuMemset) waits for all earlier work of the context's blocking "
               "streams, and blocking streams for the legacy stream's; on a GPU this is a hang if that work waits "
               "for something queued later",
               static_cast<void*>(self), self->legacy() ? " (legacy)" : " (blocking)", static_cast<void*>(other),
               other->legacy() ? " (legacy)" : " (blocking)");
        m->wait();
      }
      return sticky;
    });
  };
  if (legacy_) {
    for (Stream* s : streams().snapshot())
      if (s->ctx() == ctx_ && s->blocking() && !s->legacy()) waitFor(s);
  } else {
    waitFor(&defaultStream(ctx_));
  }
  if (!waits.empty())
    FAKE_CUDA_TRACE("stream %p: waits for %zu stream(s) (legacy default stream implicit synchronization)",
                    static_cast<void*>(this), waits.size());
  return waits;
}

void Stream::append(const std::vector<Op>& ops) {
  {
    std::lock_guard<std::mutex> g(mu_);
    for (const Op& op : ops) queue_.push_back({op, hwq_ ? hwq_->ticket(this) : 0});
    enqueued_ += ops.size();
  }
  cv_.notify_all();
}

std::shared_ptr<Graph> Stream::captureGraph() {
  std::lock_guard<std::mutex> g(captureMu);
  return capture;
}

CUstreamCaptureStatus Stream::captureStatus() {
  std::shared_ptr<Graph> g = captureGraph();
  if (!g) return CU_STREAM_CAPTURE_STATUS_NONE;
  return g->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

void Stream::run() {
  for (;;) {
    Queued next;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [this] { return !queue_.empty() || stop_; });
      if (queue_.empty()) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    if (hwq_) hwq_->awaitTurn(next.ticket, this);
    CUresult sticky;
    {
      std::lock_guard<std::mutex> g(mu_);
      sticky = sticky_;
    }
    beginRunning(hwq_);
    CUresult r = next.op(sticky);
    endRunning();
    if (r != CUDA_SUCCESS && sticky == CUDA_SUCCESS)
      FAKE_CUDA_TRACE("stream %p: failed with %s; later work on it does not run", static_cast<void*>(this), errorName(r));
    {
      std::lock_guard<std::mutex> g(mu_);
      if (sticky_ == CUDA_SUCCESS) sticky_ = r;
      done_++;
    }
    cv_.notify_all();
  }
}

CUresult Stream::synchronize() {
  if (std::shared_ptr<Graph> graph = captureGraph()) {
    graph->invalidated = true;  // the real driver invalidates the capture too
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return drain();
}

bool Stream::drainUntil(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> g(mu_);
  const uint64_t target = enqueued_;
  return cv_.wait_until(g, deadline, [&] { return done_ >= target; });
}

CUresult Stream::drain() {
  std::unique_lock<std::mutex> g(mu_);
  const uint64_t target = enqueued_;
  cv_.wait(g, [&] { return done_ >= target; });
  return sticky_;
}

CUresult Stream::query() {
  if (std::shared_ptr<Graph> graph = captureGraph()) {
    graph->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  std::lock_guard<std::mutex> g(mu_);
  if (sticky_ != CUDA_SUCCESS) return sticky_;
  return done_ == enqueued_ ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

Registry<Stream>& streams() {
  static Registry<Stream>* r = new Registry<Stream>;
  return *r;
}

namespace {
// The default stream of ctx's device, made on first use and never destroyed (its thread may
// still run at exit).
Stream& defaultStream(Context* ctx) {
  static std::mutex mu;
  static Stream* perDevice[64] = {};
  std::lock_guard<std::mutex> g(mu);
  Stream*& s = perDevice[ctx->device];
  if (s == nullptr) s = new Stream(ctx, 0, true);
  return *s;
}

// This thread's per-thread default streams, one per context; they go (after draining, in the
// background, like cuStreamDestroy) when the thread ends.
struct PerThreadStreams {
  std::vector<std::pair<Context*, Stream*>> list;
  ~PerThreadStreams() {
    for (auto& entry : list) {
      Stream* gone = entry.second;
      streams().remove(gone);
      std::thread([gone] { gone->retire(); }).detach();
    }
  }
};
thread_local PerThreadStreams tPerThread;

Stream& perThreadStream(Context* ctx) {
  for (auto& [c, s] : tPerThread.list)
    if (c == ctx) return *s;
  auto* s = new Stream(ctx, 0);
  streams().add(s);
  tPerThread.list.push_back({ctx, s});
  return *s;
}
}  // namespace

CUresult resolveStream(CUstream h, Stream** out) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    Context* ctx = nullptr;
    if (CUresult r = currentContext(&ctx)) return r;
    *out = h == CU_STREAM_PER_THREAD ? &perThreadStream(ctx) : &defaultStream(ctx);
    return CUDA_SUCCESS;
  }
  if (!streams().contains(h)) return CUDA_ERROR_INVALID_HANDLE;
  *out = reinterpret_cast<Stream*>(h);
  return CUDA_SUCCESS;
}

CUresult createStream(Context* ctx, unsigned flags, Stream** out) {
  auto* s = new Stream(ctx, flags);
  streams().add(s);
  *out = s;
  return CUDA_SUCCESS;
}

CUresult destroyStream(CUstream h) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Stream* s = reinterpret_cast<Stream*>(h);
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || !streams().remove(s))
    return CUDA_ERROR_INVALID_HANDLE;
  // Returns at once, as the real driver does; the worker finishes the queue, then goes. The
  // object is never freed: synchronizeContext (cuMemFree, cuCtxSynchronize) on another thread
  // may be walking a snapshot that still holds it.
  std::thread([s] { s->retire(); }).detach();
  return CUDA_SUCCESS;
}

CUresult synchronizeContext(Context* ctx) {
  CUresult first = defaultStream(ctx).synchronize();
  for (Stream* s : streams().snapshot()) {
    if (s->ctx() != ctx) continue;
    CUresult r = s->synchronize();
    if (first == CUDA_SUCCESS) first = r;
  }
  return first;
}

Stream* drainContextFor(Context* ctx, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  if (!defaultStream(ctx).drainUntil(deadline)) return &defaultStream(ctx);
  for (Stream* s : streams().snapshot())
    if (s->ctx() == ctx && !s->drainUntil(deadline)) return s;
  return nullptr;
}

void drainContext(Context* ctx) {
  defaultStream(ctx).drain();
  for (Stream* s : streams().snapshot())
    if (s->ctx() == ctx) s->drain();
}

}  // namespace fakecuda
