#include "work.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "streams.h"

namespace torch_accl {

AcclWork::AcclWork(int rank, c10d::OpType type, std::string opName, std::chrono::milliseconds timeout,
                   WorkOwner* owner, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), opName_(std::move(opName)), timeout_(timeout), outputs_(std::move(outputs)),
      owner_(owner),
      future_(c10::make_intrusive<at::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

bool AcclWork::isCompleted() {
  ensureLaunched();
  if (device_) return done_ev_->query();
  std::lock_guard<std::mutex> lk(mu_);
  return done_;
}

int AcclWork::sourceRank() const {
  ensureLaunched();
  int s = source_.load();
  return s >= 0 ? s : c10d::Work::sourceRank();  // not a receive: torch's own error
}

bool AcclWork::isSuccess() const {
  ensureLaunched();
  if (device_) return done_ev_->query();
  std::lock_guard<std::mutex> lk(mu_);
  return done_ && !error_;
}

std::exception_ptr AcclWork::exception() const {
  ensureLaunched();
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

void AcclWork::synchronize() {
  ensureLaunched();
  if (device_) makeCurrentStreamWait(*done_ev_, *device_);
}

#if TORCH_ACCL_WORK_HAS_BLOCK_CURRENT_STREAM
void AcclWork::blockCurrentStream() {
  ensureLaunched();
  if (!device_) return c10d::Work::blockCurrentStream();
  makeCurrentStreamWait(*done_ev_, *device_);
}
#endif

bool AcclWork::wait(std::chrono::milliseconds timeout) {
  ensureLaunched();
  if (!device_) return waitHost(timeout);
  makeCurrentStreamWait(*done_ev_, *device_);
  owner_->checkDeviceComm(*device_, opName_);
  return true;
}

// The Future exists from the start (a held tagged receive may be asked for it before it starts).
void AcclWork::hostEnqueued() {
  for (auto& m : members_) m->hostEnqueued();
  launched_.store(true);
}

void AcclWork::runPost() {
  if (post_) post_();
  post_ = nullptr;
  for (auto& m : members_) m->runPost();
}

void AcclWork::finish(std::exception_ptr err) {
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  {
    std::lock_guard<std::mutex> lk(mu_);
    done_ = true;
    error_ = err;
    callbacks.swap(onFinish_);
  }
  cv_.notify_all();
  if (err) {
    future_->setError(err);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  keepAlive_.clear();
  for (auto& m : members_) m->finish(err);
  members_.clear();
  for (auto& cb : callbacks) cb(err);
}

void AcclWork::onFinish(std::function<void(std::exception_ptr)> cb) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!done_) {
    onFinish_.push_back(std::move(cb));
    return;
  }
  auto err = error_;
  lk.unlock();
  cb(err);
}

void AcclWork::deviceEnqueued(c10::Device device, std::shared_ptr<c10::Event> done) {
  device_ = device;
  done_ev_ = std::move(done);
  // A CUDA Future completes when its value is queued; it records its own event on the current
  // (side) stream and makes whoever waits on it (DDP comm hooks, .then()) wait on the GPU.
  future_ = c10::make_intrusive<at::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                    std::vector<c10::Device>{device});
  future_->markCompleted(c10::IValue(outputs_));
  for (auto& m : members_) m->deviceEnqueued(device, done_ev_);
  members_.clear();
  launched_.store(true);
}

bool AcclWork::waitHost(std::chrono::milliseconds timeout) {
  auto limit = (timeout == kNoTimeout || timeout.count() <= 0) ? timeout_ : timeout;
  std::unique_lock<std::mutex> lk(mu_);
  // The library fails the op itself after ACCL_TIMEOUT naming the peer, a moment after this
  // deadline when ACCL_TIMEOUT is this group's timeout; the grace (a tenth of the timeout, at
  // most 5 s) lets its message win then. ACCL_TIMEOUT is read once per process, so a group
  // created with a shorter timeout than the first (or a communicator whose init waits for a
  // rank that never comes) relies on this deadline: it must fire close to the timeout, as
  // gloo's does (PyTorch's test_barrier_timeout_group waits 10 s for a 5 s timeout).
  auto grace = limit + std::min<std::chrono::milliseconds>(limit / 10, std::chrono::seconds(5));
  auto deadline = std::chrono::steady_clock::now() + grace;
  // While tagged ops are held (a receive whose message is not announced yet), look again every
  // few milliseconds: nothing else would start this one (or the held parts of a batch).
  for (;;) {
    bool held = owner_->taggedHeld();
    auto until = held ? std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(5)) : deadline;
    if (cv_.wait_until(lk, until, [&] { return done_; })) break;
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (held) {
      lk.unlock();
      owner_->flushP2P();
      lk.lock();
    }
  }
  if (!done_ && !launched_.load()) {  // a tagged receive never matched: only it fails
    lk.unlock();
    std::string why = owner_->dropHeld(this);
    if (!why.empty()) {
      hostEnqueued();
      std::string msg = c10::str("accl: ", opName_, " on rank ", rank_, ": Timed out after ", limit.count(),
                                 " ms (process-group timeout): ", why);
      finish(std::make_exception_ptr(c10::DistBackendError(
          c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg)));
      TORCH_CHECK(false, msg);
    }
    lk.lock();
  }
  if (!done_) {
    lk.unlock();
    std::string last = owner_->lastError();
    owner_->abortComm();
    lk.lock();
    cv_.wait_for(lk, std::chrono::seconds(5), [&] { return done_; });
    // "Timed out" is what PyTorch's tests (and log scrapers) look for, as gloo and NCCL say it.
    TORCH_CHECK(false, "accl: ", opName_, " on rank ", rank_, ": Timed out after ", limit.count(),
                " ms (process-group timeout)", owner_->missingPeers(collSeq_), last.empty() ? "" : " - ", last,
                ". The communicator was aborted.");
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

}  // namespace torch_accl
