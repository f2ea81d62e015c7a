// setup.h: what a transport sees of its communicator while it connects peers. Transports sit
// below the communicator (src/comm), so they get this view rather than the Comm itself.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "bootstrap/bootstrap.h"
#include "transports/peer_info.h"
#include "transports/transport.h"

namespace accl {

struct Doorbell;

struct TransportSetup {
  int rank = 0;
  int nranks = 0;
  uint64_t nonce = 0;                         // names this communicator (rank 0's commNonce)
  Bootstrap* bootstrap = nullptr;             // out-of-band messages to peers
  const std::vector<PeerInfo>* peers = nullptr;  // everyone's published record, by rank
  std::atomic<int>* abortFlag = nullptr;      // non-zero: give up (ncclCommAbort)
  size_t ringBytes = 0;                       // capacity of each direction's byte ring
  Doorbell* bell = nullptr;                   // rung when data for this rank arrives
  // Where connections go, by peer rank.
  std::vector<std::unique_ptr<PeerConnection>>* conns = nullptr;

  const PeerInfo& me() const { return (*peers)[rank]; }
  std::string describePeer(int peer) const { return accl::describePeer(*peers, peer); }
};

}  // namespace accl
