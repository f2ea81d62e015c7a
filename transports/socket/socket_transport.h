// socket_transport.h: connections between ranks on different hosts (or with NCCL_SHM_DISABLE=1).
// One peer's byte stream is striped over several TCP sockets; helper threads move bytes
// between the local staging rings and the sockets and ring the owner's doorbell, so the
// executor waits on its futex doorbell exactly as it does for shared memory. Small commits
// and reads of awaited bytes the executor does itself (socket_transport.cc).
#pragma once
#include <memory>
#include <vector>
#include "net/socket.h"
#include "topo/cpu_mask.h"
#include "transports/socket/socket_link.h"
#include "transports/transport.h"

namespace accl {

// How many sockets and helper threads one peer connection uses, from NCCL_SOCKET_NTHREADS and
// NCCL_NSOCKS_PERTHREAD (automatic when unset); both ends must compute the same value.
struct SocketLayout {
  int nthreads = 1;
  int nsocksPerThread = 1;
  int nsocks() const { return nthreads * nsocksPerThread; }
};
SocketLayout socketLayout();

// `socks` are already connected and tuned, in stripe order (index i carries chunks i, i+K, ...).
std::unique_ptr<PeerConnection> makeSocketConnection(std::vector<net::Socket> socks, size_t ringBytes,
                                                     const SocketLayout& layout, Doorbell* bell, SocketPeer peer,
                                                     const topo::CpuMask& cpus);

}  // namespace accl
