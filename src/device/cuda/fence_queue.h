// fence_queue.h: fences of the data calls queued on one CUDA stream. Every call records an
// event; since the stream runs in order, a completed event completes every earlier fence too,
// so polling walks the oldest events only and recycles them.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>
#include "device/backend.h"
#include "device/cuda/driver_api.h"

namespace accl::dev::cuda {

class FenceQueue {
 public:
  FenceQueue(const DriverApi& api, CUstream stream) : api_(api), stream_(stream) {}
  ~FenceQueue();
  FenceQueue(const FenceQueue&) = delete;
  FenceQueue& operator=(const FenceQueue&) = delete;

  // A fence for everything queued on the stream so far; {} (complete) when recording fails,
  // with failed() set.
  Fence record();
  bool poll(Fence f);
  // Everything recorded so far is complete (or failed).
  bool idle();
  bool failed() const { return failed_; }
  CUresult error() const { return error_; }

 private:
  struct Pending {
    uint64_t id;
    CUevent event;
  };
  void fail(CUresult r);

  const DriverApi& api_;
  CUstream stream_;
  std::deque<Pending> pending_;
  std::vector<CUevent> spare_;
  uint64_t nextId_ = 1;
  uint64_t completed_ = 0;  // every fence with id <= completed_ is done
  bool failed_ = false;
  CUresult error_ = kSuccess;
};

}  // namespace accl::dev::cuda
