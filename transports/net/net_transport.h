// net_transport.h: the transport between hosts (and between any ranks when shared memory is
// off): the internal socket transport, or a net module (plugin) when one is loaded and chosen
// (net_select.h). It can connect any pair of ranks, so it comes last in the list.
//
// Sockets connect lazily, like shared memory: a pair is connected when a step first uses it.
// The lower rank connects to the higher rank's data listener from connect(); the higher rank's
// connect() makes the connection at once and its sockets are attached when they arrive (an
// acceptor thread reads and checks every handshake: the job's magic, the communicator's
// nonce, a peer of this transport, a stripe not yet taken; anything else is dropped and
// logged). A net plugin connects its peers eagerly, in setup().
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include "net/socket.h"
#include "net/socket_connect.h"
#include "transports/net/net_select.h"
#include "transports/setup.h"
#include "transports/socket/socket_transport.h"

namespace accl {

class NetTransport final : public Transport {
 public:
  NetTransport();
  ~NetTransport() override;
  const char* name() const override { return "NET"; }
  ncclResult_t publish(TransportSetup& ctx, PeerInfo* me) override;
  bool canConnect(const PeerInfo&, const PeerInfo&) const override { return true; }
  ncclResult_t setup(TransportSetup& ctx, const std::vector<int>& peers) override;
  ncclResult_t connect(TransportSetup& ctx, int peer, std::unique_ptr<PeerConnection>* out) override;
  RingMemory ringMemory() const override { return RingMemory::HostPrivate; }

 private:
  // A lower-rank peer's incoming sockets and the connection they go to.
  struct Incoming {
    std::vector<net::Socket> socks;  // by stripe index, until complete
    std::shared_ptr<SocketConnection> conn;
    bool attached = false;
  };
  std::shared_ptr<SocketConnection> incomingConnection(int peer);  // under mu_
  void acceptLoop(const net::Socket& listener, int rail);
  // The pair's layout: layout_ over the rails both ranks have.
  SocketLayout layoutFor(int peer) const;

  std::vector<net::Socket> listeners_;         // the internal socket transport's data listener per rail
  std::unique_ptr<net::NetCommState> plugin_;  // a net module's context and progress thread

  // The internal socket transport (lazy), fixed in setup().
  bool sockets_ = false;
  std::vector<bool> mine_;  // by rank: peers this transport carries
  net::MeshSelf self_;
  const std::vector<PeerInfo>* peers_ = nullptr;
  SocketLayout layout_;
  size_t ringBytes_ = 0;
  Doorbell* bell_ = nullptr;
  topo::CpuMask cpus_;
  std::mutex mu_;
  std::map<int, Incoming> incoming_;
  // Connections this rank opened (to higher ranks), for the peer's notice that a rail failed.
  std::map<int, std::weak_ptr<SocketConnection>> outgoing_;
  int lowerPeers_ = 0;  // lower-rank peers still to arrive
  bool rails_ = false;  // several rails: the acceptors stay, for sockets that move (failover)
  std::atomic<int> stopAcceptor_{0};
  std::vector<std::thread> acceptors_;  // one per rail's listener
};

}  // namespace accl
