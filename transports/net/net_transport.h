// net_transport.h: the transport between hosts (and between any ranks when shared memory is
// off): the internal socket transport, or a net module (plugin) when one is loaded and chosen
// (net_select.h). It can connect any pair of ranks, so it comes last in the list. It connects
// eagerly: all its peers during setup, since both ends of a socket pair must meet.
#pragma once
#include <memory>
#include <vector>
#include "net/socket.h"
#include "transports/net/net_select.h"
#include "transports/setup.h"

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
  ncclResult_t connectSockets(TransportSetup& ctx, const std::vector<int>& peers);
  net::Socket listener_;                       // the internal socket transport's data listener
  std::unique_ptr<net::NetCommState> plugin_;  // a net module's context and progress thread
};

}  // namespace accl
