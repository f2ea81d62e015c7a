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
// Sends publish from a thread of the ledger (started by the first send), batching what
// accumulated, so a send never waits for the store; a receiver sees the count within a store
// round trip of the send call, whether or not the send itself has started yet.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace torch_accl {

class SendLedger {
 public:
  SendLedger(c10::intrusive_ptr<c10d::Store> store, int rank, int size);
  ~SendLedger() { stop(); }

  // A send to `dst` was issued (published asynchronously).
  void noteSend(int dst);
  // A receive naming `src` was issued: it takes src's next message.
  void noteRecv(int src);
  // Blocks until some peer has a message nobody here has claimed, claims it and returns the
  // peer's rank; raises "Timed out" (naming `what`) at `deadline`.
  int claimAny(std::chrono::steady_clock::time_point deadline, const std::string& what);
  // Publishes what is still unpublished and ends the thread. Idempotent.
  void stop();

 private:
  std::string key(int src, int dst) const;
  void publishLoop();

  c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const int size_;
  std::vector<int64_t> claimed_;    // per source; under mu_
  std::vector<int64_t> sentSeen_;   // per source: the last total read from the store; under mu_
  int nextPeer_ = 0;                // where the next claimAny starts looking (fairness)
  std::map<int, int64_t> unpublished_;  // dst -> sends not yet added to the store; under mu_
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread publisher_;
  bool stopping_ = false;
};

}  // namespace torch_accl
