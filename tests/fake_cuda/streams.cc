// streams.cc: a stream is an in-order queue of operations run by its own worker thread, which
// also waits for the operation's turn on the stream's hardware queue (hw_queues.cc). The
// first operation that fails leaves its error on the stream (sticky, like a GPU fault: later
// work does not run and later synchronize/query calls report it). The NULL stream,
// CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are one process-wide default stream; the legacy
// stream's implicit synchronization with blocking streams is NOT emulated.
// (One default stream per device, as on the GPU: ranks on two devices never share one.)
#include "internal.h"

namespace fakecuda {

Op work(std::function<CUresult()> body) {
  return [body = std::move(body)](CUresult sticky) { return sticky != CUDA_SUCCESS ? sticky : body(); };
}

Stream::Stream(Context* ctx, unsigned flags, bool isDefault)
    : ctx_(ctx), flags_(flags), hwq_(assignHwQueue(ctx, isDefault)), worker_([this] { run(); }) {
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
}  // namespace

CUresult resolveStream(CUstream h, Stream** out) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    Context* ctx = nullptr;
    if (CUresult r = currentContext(&ctx)) return r;
    *out = &defaultStream(ctx);
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

void drainContext(Context* ctx) {
  defaultStream(ctx).drain();
  for (Stream* s : streams().snapshot())
    if (s->ctx() == ctx) s->drain();
}

}  // namespace fakecuda
