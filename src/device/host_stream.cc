#include "device/host_stream.h"
#include <memory>
#include <unordered_map>
#include <sched.h>
#include <chrono>
#include "base/log.h"

namespace accl {
namespace {

// Spins (pause, then yield so runnable ranks get the core) for up to ~60 us until pred().
template <typename Pred>
bool spinUntil(Pred pred) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0;; i++) {
    if (pred()) return true;
    if (i < 256) {
      __builtin_ia32_pause();
      continue;
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::microseconds(60)) return false;
    sched_yield();
  }
}

std::mutex gRegistryMu;
// Owners of every live stream and event, keyed by the handle users hold.
std::unordered_map<void*, std::unique_ptr<HostStream>>& streams() {
  static std::unordered_map<void*, std::unique_ptr<HostStream>> s;
  return s;
}
std::unordered_map<void*, std::shared_ptr<HostEvent>>& events() {
  static std::unordered_map<void*, std::shared_ptr<HostEvent>> s;
  return s;
}

}  // namespace

HostStream::HostStream() : worker_([this] { run(); }) {}

HostStream::~HostStream() {
  {
    std::unique_lock<std::mutex> lk(mu_);
    stopping_ = true;
  }
  workCv_.notify_all();
  worker_.join();
}

void HostStream::enqueue(StreamTask task) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(task));
    pending_.fetch_add(1);
    queued_.fetch_add(1);
  }
  workCv_.notify_one();
}

void HostStream::enqueueResumable(std::function<ncclResult_t(int64_t, bool*)> task, int64_t inlineUsec) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    const bool idle = pending_.load(std::memory_order_relaxed) == 0 && !stopping_;
    if (!idle || inlineUsec < 0) {
      queue_.push_back([task = std::move(task)] {
        bool done = false;
        return task(-1, &done);
      });
      pending_.fetch_add(1);
      queued_.fetch_add(1);
      workCv_.notify_one();
      return;
    }
    inlineRunning_ = true;  // the stream is ours: enqueues queue behind, the worker waits
    pending_.fetch_add(1);
  }
  bool done = false;
  ncclResult_t res = task(inlineUsec, &done);
  std::lock_guard<std::mutex> lk(mu_);
  inlineRunning_ = false;
  if (!done) {  // it waits on peers: the worker finishes it, before anything queued since
    queue_.push_front([task = std::move(task)] {
      bool finished = false;
      return task(-1, &finished);
    });
    queued_.fetch_add(1);
    workCv_.notify_one();
    return;
  }
  if (res != ncclSuccess && error_ == ncclSuccess) error_ = res;
  if (pending_.fetch_sub(1) == 1) idleCv_.notify_all();
  if (!queue_.empty()) workCv_.notify_one();
}

void HostStream::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (queue_.empty() && !stopping_) {
      lk.unlock();
      spinUntil([&] { return queued_.load(std::memory_order_acquire) != 0; });
      lk.lock();
    }
    workCv_.wait(lk, [&] { return (stopping_ || !queue_.empty()) && !inlineRunning_; });
    if (queue_.empty()) return;  // stopping and drained
    StreamTask task = std::move(queue_.front());
    queue_.pop_front();
    queued_.fetch_sub(1);
    lk.unlock();
    ncclResult_t res = task();
    task = nullptr;  // drop captured references before reporting completion
    lk.lock();
    if (res != ncclSuccess && error_ == ncclSuccess) error_ = res;
    if (pending_.fetch_sub(1) == 1) idleCv_.notify_all();
  }
}

ncclResult_t HostStream::synchronize() {
  spinUntil([&] { return pending_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lk(mu_);
  idleCv_.wait(lk, [&] { return pending_.load() == 0; });
  return error_;
}

ncclResult_t HostStream::query() {
  std::lock_guard<std::mutex> lk(mu_);
  if (error_ != ncclSuccess) return error_;
  return pending_ == 0 ? ncclSuccess : ncclInProgress;
}

void HostEvent::record(HostStream* stream) {
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lk(mu_);
    gen = ++recorded_;
  }
  stream->enqueue([self = shared_from_this(), gen] {
    self->complete(gen);
    return ncclSuccess;
  });
}

void HostEvent::complete(uint64_t gen) {
  // Notified under the lock: a waiter that sees the new value can only do so after this
  // returns, so it may destroy the event right away (ThreadSanitizer found the other order).
  std::lock_guard<std::mutex> lk(mu_);
  if (gen > completed_) completed_ = gen;
  cv_.notify_all();
}

void HostEvent::waitFor(uint64_t gen) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return completed_ >= gen; });
}

ncclResult_t HostEvent::query() {
  std::lock_guard<std::mutex> lk(mu_);
  return completed_ >= recorded_ ? ncclSuccess : ncclInProgress;
}

void HostEvent::synchronize() {
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lk(mu_);
    gen = recorded_;
  }
  waitFor(gen);
}

void HostEvent::makeWait(HostStream* stream) {
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lk(mu_);
    gen = recorded_;
  }
  stream->enqueue([self = shared_from_this(), gen] {
    self->waitFor(gen);
    return ncclSuccess;
  });
}

HostStream* lookupHostStream(cudaStream_t s) {
  std::lock_guard<std::mutex> lk(gRegistryMu);
  auto it = streams().find(s);
  return it == streams().end() ? nullptr : it->second.get();
}

bool isHostEvent(ncclHostEvent* e) {
  std::lock_guard<std::mutex> lk(gRegistryMu);
  return events().count(e) != 0;
}

HostStream* createHostStream() {
  auto s = std::make_unique<HostStream>();
  HostStream* raw = s.get();
  std::lock_guard<std::mutex> lk(gRegistryMu);
  streams()[raw] = std::move(s);
  return raw;
}

void destroyHostStream(HostStream* s) {
  std::unique_ptr<HostStream> owned;
  {
    std::lock_guard<std::mutex> lk(gRegistryMu);
    auto node = streams().extract(s);
    if (!node.empty()) owned = std::move(node.mapped());
  }
  // `owned` joins the worker here, outside the registry lock.
}

HostEvent* createHostEvent() {
  auto e = std::make_shared<HostEvent>();
  HostEvent* raw = e.get();
  std::lock_guard<std::mutex> lk(gRegistryMu);
  events()[raw] = std::move(e);
  return raw;
}

void destroyHostEvent(HostEvent* e) {
  std::shared_ptr<HostEvent> owned;
  std::lock_guard<std::mutex> lk(gRegistryMu);
  auto node = events().extract(e);
  if (!node.empty()) owned = std::move(node.mapped());
}

}  // namespace accl
