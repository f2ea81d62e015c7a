// bootstrap_impl.h: a Bootstrap's state, shared by bootstrap.cc (rendezvous, ring, liveness)
// and bootstrap_p2p.cc (tagged point-to-point messages).
#pragma once
#include <chrono>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include "bootstrap/acceptor.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"

namespace accl {

struct Bootstrap::Impl {
  int rank = 0;
  int nranks = 0;
  uint64_t magic = 0;
  char label[kUniqueIdLabelBytes] = {};  // what the unique id is for (see UniqueIdContents)
  boot::Digest connKey{};  // signs and checks rank-to-rank handshakes (auth.h)
  boot::ReplayGuard replay;  // handshake nonces this listener accepted (under recvMu/ringMu use)
  const std::atomic<int>* abortFlag = nullptr;  // the caller's flag, or ownAbort if none given
  std::atomic<int> ownAbort{0};
  std::atomic<bool> aborted{false};  // abort() was called

  net::Socket listener;  // ring and point-to-point connections from other ranks arrive here
  std::optional<boot::HandshakeAcceptor> acceptor;
  std::vector<net::SockAddr> table;  // every rank's listener
  std::vector<std::string> peerDesc;  // "rank 3 (10.0.0.2:41234)", for logs

  std::mutex ringMu;
  net::Socket ringNext, ringPrev;

  std::mutex sendMu;   // one send at a time
  std::mutex recvMu;   // one recv (and so one acceptor user) at a time
  std::mutex socketsMu;  // the maps' structure, so abort() can walk them from another thread
  std::map<int, net::Socket> p2pOut, p2pIn;
  struct Message {
    int peer;
    int tag;
    std::vector<char> data;
  };
  std::mutex queueMu;
  std::deque<Message> unexpected;

  // While init sets up transports (Bootstrap::setDeadline): when waits for a peer give up.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  int64_t deadlineSec = 0;
  std::string deadlineWhat;
  // Milliseconds a wait may take (-1: no limit), at least 1 until the deadline.
  int waitMs() const;
  // A wait for `peer` (for `what`) that failed: past the deadline, WARNed as such and
  // ncclRemoteError; otherwise `res` unchanged.
  ncclResult_t waited(ncclResult_t res, int peer, const char* what) const;

  int next() const { return (rank + 1) % nranks; }
  int prev() const { return (rank + nranks - 1) % nranks; }
  const char* desc(int r) const { return peerDesc[r].c_str(); }
  // After abort(), whatever error a shut-down socket produced reads as an abort.
  ncclResult_t result(ncclResult_t res) const {
    return res != ncclSuccess && aborted.load() ? ncclInternalError : res;
  }
  // A signed handshake to `peer`, logged and ncclSystemError if no nonce could be made.
  ncclResult_t handshakeTo(int peer, boot::Purpose purpose, boot::Handshake* out) const;
  // Accepts connections until one of `purpose` from `peer` has arrived (filing the others).
  ncclResult_t waitForConnection(int peer, boot::Purpose purpose, int timeoutMs);
};

}  // namespace accl
