// work.h: the c10d::Work (and its Future) of one op on the "accl" backend.
//
// Two ways to complete, by where the tensors live:
// * CPU tensors: the op runs on the group's ACCL host stream; the group's completion thread
//   waits on the host event recorded after it, runs the copy-back (post_), then finish()es
//   the Work and its Future. wait() blocks the caller up to the process-group timeout.
// * CUDA tensors: the op runs on the group's side stream (streams.h); deviceEnqueued() keeps
//   the event recorded after it and completes the Future at once, in CUDA terms (its value
//   is ready on that stream, as ProcessGroupNCCL's is). wait() makes the caller's current
//   stream wait for the event and raises if the communicator has failed; the host does not wait.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <cstdint>
#include <exception>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "accl.h"
#include "torch_compat.h"

namespace torch_accl {

class AcclWork;

// What a Work needs from its process group (implemented by AcclBackend).
class WorkOwner {
 public:
  virtual ~WorkOwner() = default;
  virtual std::string lastError() const = 0;
  // Aborts the group's communicators (a wait ran out of time).
  virtual void abortComm() = 0;
  // "; missing peer rank N (...)" for collective #seq, or "".
  virtual std::string missingPeers(uint64_t seq) = 0;
  // Raises DistBackendError naming `opName` when the communicator serving `device` has failed.
  virtual void checkDeviceComm(c10::Device device, const std::string& opName) = 0;
  // Starts the point-to-point ops held back for grouping (AcclBackend::launchP2P).
  virtual void flushP2P() = 0;
  // Whether tagged ops are held (a receive whose message is not announced yet): a waiter then
  // calls flushP2P() now and then, which matches them (tag_lane.h).
  virtual bool taggedHeld() const = 0;
  // Removes a held tagged op whose wait timed out; returns why it was held ("" if it was not).
  virtual std::string dropHeld(const AcclWork* w) = 0;
};

class AcclWork : public c10d::Work {
 public:
  AcclWork(int rank, c10d::OpType type, std::string opName, std::chrono::milliseconds timeout, WorkOwner* owner,
           std::vector<at::Tensor> outputs);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  // The peer of a receive (dist.recv's return value; for any source, known once started).
  int sourceRank() const override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    ensureLaunched();
    return future_;
  }
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout) override;
#if TORCH_ACCL_WORK_HAS_BLOCK_CURRENT_STREAM
  // CUDA: the current stream waits for the op's event; CPU: torch's own way.
  void blockCurrentStream() override;
#endif

  // Host path: the Future, then (completion thread) the outcome.
  void hostEnqueued();
  // Copy-back of this op and of its members, then finish() (members too).
  void runPost();
  void finish(std::exception_ptr err);
  // Runs cb(error) once this Work has finished (at once if it has).
  void onFinish(std::function<void(std::exception_ptr)> cb);
  // Device path: called on the side stream (a StreamGuard is active) once the op is queued.
  void deviceEnqueued(c10::Device device, std::shared_ptr<c10::Event> done);

  const std::string opName_;
  const std::chrono::milliseconds timeout_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keepAlive_;  // every buffer the NCCL calls read or write
  std::function<void()> post_;         // copy-back of staged outputs, after the op
  ncclHostEvent_t event_ = nullptr;    // host path
  uint64_t collSeq_ = 0;               // collective number in this group (0: point-to-point)
  std::atomic<int> source_{-1};        // receives: the peer
  // The ops of a batch (launched as one NCCL group): they complete with this Work.
  std::vector<c10::intrusive_ptr<AcclWork>> members_;
  std::atomic<bool> launched_{false};  // false while held back by launchP2P

 private:
  bool waitHost(std::chrono::milliseconds timeout);
  // A Work held back for grouping is started before anyone looks at it.
  void ensureLaunched() const {
    if (!launched_.load()) owner_->flushP2P();
  }

  WorkOwner* owner_;
  c10::intrusive_ptr<at::ivalue::Future> future_;
  std::optional<c10::Device> device_;   // device path
  std::shared_ptr<c10::Event> done_ev_;  // device path
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<std::function<void(std::exception_ptr)>> onFinish_;  // under mu_
};

}  // namespace torch_accl
