// stream.h: host streams and events (the host backend's cudaStream_t / cudaEvent_t). A
// stream is an in-order queue served by its own worker thread, which sleeps when idle.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include "nccl.h"

struct ncclHostEvent;  // accl.h handle type (global namespace)

namespace accl {

using StreamTask = std::function<ncclResult_t()>;

class HostStream {
 public:
  HostStream();
  ~HostStream();  // drains the queue, then joins the worker
  void enqueue(StreamTask task);
  // When the stream is idle, runs `task` on the calling thread for up to `inlineUsec` of
  // waiting (a ready op then finishes with no hand-off to the worker, which costs a thread
  // switch per op on a busy host); whatever is left goes to the front of the queue, ahead of
  // anything enqueued meanwhile. Otherwise (or with inlineUsec < 0) it is simply queued.
  void enqueueResumable(std::function<ncclResult_t(int64_t, bool*)> task, int64_t inlineUsec);
  ncclResult_t synchronize();
  // ncclSuccess when idle, ncclInProgress while work is pending, or the sticky error.
  ncclResult_t query();

 private:
  void run();
  std::mutex mu_;
  std::condition_variable workCv_;
  std::condition_variable idleCv_;
  std::deque<StreamTask> queue_;
  // Mirrors of queue_.size() and the unfinished count, readable without the lock, so the
  // worker and synchronize() can spin briefly before paying a 20-30 us sleep/wake-up.
  std::atomic<uint64_t> queued_{0};
  std::atomic<uint64_t> pending_{0};
  bool stopping_ = false;
  bool inlineRunning_ = false;  // a caller runs the stream's head task; the worker waits
  ncclResult_t error_ = ncclSuccess;
  std::thread worker_;
};

// Queued record/wait tasks hold a shared reference, so destroying an event whose tasks have
// not run yet (allowed, as with cudaEventDestroy) is safe.
class HostEvent : public std::enable_shared_from_this<HostEvent> {
 public:
  void record(HostStream* stream);
  ncclResult_t query();
  void synchronize();
  // Makes `stream` wait (in order) until the latest record() of this event has completed.
  void makeWait(HostStream* stream);

 private:
  void complete(uint64_t gen);
  void waitFor(uint64_t gen);
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t recorded_ = 0;
  uint64_t completed_ = 0;
};

// Host streams are validated through a registry so that a CUDA stream or garbage pointer
// is rejected with a clear error rather than dereferenced.
HostStream* lookupHostStream(cudaStream_t s);
bool isHostEvent(::ncclHostEvent* e);
HostStream* createHostStream();
void destroyHostStream(HostStream* s);
HostEvent* createHostEvent();
void destroyHostEvent(HostEvent* e);

}  // namespace accl
