// send_ledger.h: receive from any source (dist.recv without src) over NCCL point-to-point,
// which must name the peer.
//
// The protocol, with the group's c10d store as the channel every rank can read: each rank
// counts the sends it issues to each peer (CPU tensors, one communicator) and publishes the
// running total under "accl/sent/<src>/<dst>"; a receiver counts, per source, the messages it
// has claimed (explicit recvs and any-source ones). Between a pair, messages match in posting
// order, so source s has an unclaimed message for us exactly when sent(s -> us) > claimed(s);
// an any-source receive polls the peers for one and then receives from it with ncclRecv.
//
// A send publishes its count on the calling thread, before the send call returns (one store
// round trip per CPU send). Not from a thread of its own: the store's client serves one request
// at a time, and a blocking request of the caller's (new_group waiting for a key another rank
// sets only after its any-source receive has completed) held it while the count waited behind
// it: a receiver waiting for that count and this rank waiting for the receiver's key stalled
// until the timeout (seen with torch 2.5, 1 run in 15 under load).
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <cstdint>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace torch_accl {

class SendLedger {
 public:
  SendLedger(c10::intrusive_ptr<c10d::Store> store, int rank, int size);

  // A send to `dst` was issued: published before this returns.
  void noteSend(int dst);
  // A receive naming `src` was issued: it takes src's next message.
  void noteRecv(int src);
  // Blocks until some peer has a message nobody here has claimed, claims it and returns the
  // peer's rank; raises "Timed out" (naming `what`) at `deadline`.
  int claimAny(std::chrono::steady_clock::time_point deadline, const std::string& what);

 private:
  std::string key(int src, int dst) const;

  c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const int size_;
  std::vector<int64_t> claimed_;    // per source; under mu_
  std::vector<int64_t> sentSeen_;   // per source: the last total read from the store; under mu_
  int nextPeer_ = 0;                // where the next claimAny starts looking (fairness)
  std::mutex mu_;
};

}  // namespace torch_accl
