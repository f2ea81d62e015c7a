// socket_connect.h: the striped TCP data sockets between this rank and a set of peers. Lower
// rank connects, higher rank accepts; each pair opens `nsocks` sockets, each starting with a
// handshake naming the communicator (magic, nonce), the caller and the stripe index. Both sides
// are bounded by ACCL_SOCKET_CONNECT_TIMEOUT_MSEC, so an unreachable peer fails quickly with a
// WARN naming it (rank, host, address, interface) instead of hanging. Knows sockets, not
// communicators: the socket transport builds its connections from what this hands back.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include "net/socket.h"

namespace accl::net {

struct MeshSelf {
  int rank = -1;
  uint64_t magic = 0;  // the job's bootstrap magic
  uint64_t nonce = 0;  // the communicator's nonce
  std::string hostname;
  std::string ifname;  // the interface `addr` belongs to
  SockAddr addr;       // where the listener is bound
};

struct MeshPeer {
  int rank = -1;
  SockAddr addr;       // its data listener
  std::string name;    // "rank 3 (host pod1, 10.77.2.2:41000, hpn0)", for messages
};

// Receives each peer's sockets, connected, authenticated and tuned, in stripe order.
using MeshConnected = std::function<void(int peerRank, std::vector<Socket> socks)>;

ncclResult_t connectPeers(const MeshSelf& self, const std::vector<MeshPeer>& peers, int nsocks,
                          const Socket& listener, const std::atomic<int>* abortFlag,
                          const MeshConnected& connected);

}  // namespace accl::net
