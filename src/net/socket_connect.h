// socket_connect.h: the striped TCP data sockets between this rank and a peer. Lower rank
// connects, higher rank accepts; each pair opens `nsocks` sockets, each starting with a
// handshake naming the communicator (magic, nonce), the caller and the stripe index. Connects
// are bounded by ACCL_SOCKET_CONNECT_TIMEOUT_MSEC, so an unreachable peer fails quickly with a
// WARN naming it (rank, host, address, interface) instead of hanging. Knows sockets, not
// communicators: the socket transport accepts (transports/net/net_transport.cc) and builds its
// connections from what this hands back.
#pragma once
#include <atomic>
#include <cstdint>
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
  std::vector<SockAddr> railAddrs;  // our address on each rail (source of rail r's sockets)
};

struct MeshPeer {
  int rank = -1;
  SockAddr addr;       // its data listener
  std::string name;    // "rank 3 (host pod1, 10.77.2.2:41000, hpn0)", for messages
  // Its data listener on each rail, when the pair uses several (rail r's sockets go there from
  // our address on rail r); empty: one rail, `addr`.
  std::vector<SockAddr> railAddrs;
  std::vector<std::string> railNames;  // `name` as seen on each rail
};

// First bytes of every data socket: who is calling, for which communicator, which stripe.
// The magic comes first (boot::HandshakeAcceptor reads it).
struct DataHandshake {
  uint64_t magic;
  uint64_t nonce;
  int32_t rank;
  int32_t sockIndex;
  int32_t nsocks;
  // 1: replaces stripe sockIndex of an existing connection (a rail failed); 2: a notice from
  // the higher (accepting) rank that its end of stripe sockIndex failed on rail resumeFrom, so
  // the lower rank replaces it now rather than after its own timeout.
  int32_t resume;
  uint64_t resumeFrom;  // resume 1: the next byte of that stripe the caller expects; 2: the rail
};

// The connecting (lower-rank) side of one pair: opens `nsocks` sockets to `peer` (split evenly
// over its rails in order: socket i is on rail i / (nsocks / rails)), each within
// ACCL_SOCKET_CONNECT_TIMEOUT_MSEC, sends their handshakes and tunes them. An unreachable peer
// is WARNed naming it (ncclRemoteError); abort gives ncclInternalError.
ncclResult_t connectDataSockets(const MeshSelf& self, const MeshPeer& peer, int nsocks,
                                const std::atomic<int>* abortFlag, std::vector<Socket>* out);

// Tunes an accepted data socket as connectDataSockets tunes its own.
void prepareDataSocket(const Socket& s);

}  // namespace accl::net
