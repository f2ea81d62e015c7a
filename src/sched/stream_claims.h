// stream_claims.h: catches the one way several ranks of a process can deadlock on a shared
// device stream. A device stream runs its work in order, and a collective queued on it holds
// the stream until every rank has joined. When two ranks of one communicator are queued on the
// same stream by separate launches (two threads both passing the NULL stream, or one thread
// without ncclGroupStart/End), the rank queued second sits behind the first, which waits for
// it: both wait forever. Each launch claims the device streams it queues on for the
// (communicator, rank) pairs it carries; a launch that brings a rank of a communicator behind
// a still pending claim on the same stream without that rank is refused with
// ncclInvalidUsage, before anything is planned or queued. A claim ends when its task has run
// (or was dropped by abort/destroy).
#pragma once
#include <functional>
#include <memory>
#include <thread>
#include <vector>
#include "nccl.h"
#include "sched/op.h"

namespace accl {

// A launch's pending use of one device stream (see above); released by release() or when the
// last reference goes.
class StreamClaim {
 public:
  struct Member {
    uint64_t nonce;  // the communicator (same on every rank)
    int rank;
  };
  StreamClaim(const void* domain, cudaStream_t stream, std::vector<Member> members);
  ~StreamClaim();
  StreamClaim(const StreamClaim&) = delete;
  StreamClaim& operator=(const StreamClaim&) = delete;
  void release();
  const void* domain() const { return domain_; }
  cudaStream_t stream() const { return stream_; }

 private:
  friend ncclResult_t claimDeviceStreams(const std::vector<std::unique_ptr<OpDesc>>&,
                                         std::vector<std::shared_ptr<StreamClaim>>*);
  const void* domain_;
  cudaStream_t stream_;
  std::thread::id thread_;  // cudaStreamPerThread names a different stream in every thread
  std::vector<Member> members_;
  bool live_ = false;
};

// Claims every device stream the ops of one launch queue collectives with peers on; on a
// conflict returns ncclInvalidUsage (WARN naming the ranks, the stream and the fix) and
// claims nothing.
ncclResult_t claimDeviceStreams(const std::vector<std::unique_ptr<OpDesc>>& ops,
                                std::vector<std::shared_ptr<StreamClaim>>* out);

// The kernel path (sched/device_collective.h) queues kernels that end later, on the device: a
// claim it holds ends once `done()` says the stream has run what was queued (looked at by every
// later claimDeviceStreams, before it checks for conflicts).
void holdClaimUntil(std::shared_ptr<StreamClaim> claim, std::function<bool()> done);

// The claim of `out` for (domain, stream), or null.
std::shared_ptr<StreamClaim> findClaim(const std::vector<std::shared_ptr<StreamClaim>>& claims, const void* domain,
                                       cudaStream_t stream);

}  // namespace accl
