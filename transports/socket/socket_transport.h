// socket_transport.h: connections between ranks on different hosts (or with NCCL_SHM_DISABLE=1).
// One peer's byte stream is striped over several TCP sockets; helper threads move bytes
// between the local staging rings and the sockets and ring the owner's doorbell, so the
// executor waits on its futex doorbell exactly as it does for shared memory. Small commits
// and reads of awaited bytes the executor does itself (socket_transport.cc).
#pragma once
#include <functional>
#include <memory>
#include <vector>
#include "net/socket.h"
#include "topo/cpu_mask.h"
#include "transports/socket/socket_link.h"
#include "transports/transport.h"

namespace accl {

// How many sockets and helper threads one peer connection uses, from NCCL_SOCKET_NTHREADS and
// NCCL_NSOCKS_PERTHREAD (automatic when unset) per rail, times the rails the pair shares; both
// ends must compute the same value. Sockets are numbered rail by rail (rail r: r * perRail()
// ...), and the stripe deals chunks over all of them, so each rail carries an equal share.
struct SocketLayout {
  int nthreads = 1;
  int nsocksPerThread = 1;
  int nrails = 1;
  int perRail() const { return nthreads * nsocksPerThread; }
  int nsocks() const { return nrails * perRail(); }
};
SocketLayout socketLayout();

// A socket connection whose sockets may arrive after it is made (connections are made when a
// pair is first used; the accepting side's sockets come when the peer first uses it). Until
// then the executor fills the send ring and finds the receive ring empty, as if the peer were
// slow; the helper threads (on `cpus`) start when the sockets are attached.
class SocketConnection : public PeerConnection {
 public:
  // `socks`: connected and tuned, in stripe order (index i carries chunks i, i+K, ...).
  // Ignored (the sockets are closed) if the connection was closed meanwhile.
  virtual void attach(std::vector<net::Socket> socks) = 0;
  // Several rails: how the connecting side reaches the peer again when a rail fails (before
  // attach; the accepting side has none and waits for the peer, see rail_failover.cc).
  virtual void setRedial(SocketLink::Redial redial) = 0;
  // Accepting side: the peer replaced stripe s by `sock` on `rail` (a rail failed or came back).
  virtual ncclResult_t acceptResume(int s, int rail, net::Socket sock, uint64_t peerPos) = 0;
  // Connecting side: the peer's end of stripe s failed on `rail` (SocketLink::peerLost).
  virtual void peerLost(int s, int rail) = 0;
};

std::unique_ptr<SocketConnection> makeSocketConnection(size_t ringBytes, const SocketLayout& layout, Doorbell* bell,
                                                       SocketPeer peer, const topo::CpuMask& cpus);

}  // namespace accl
