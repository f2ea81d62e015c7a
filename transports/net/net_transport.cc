#include "transports/net/net_transport.h"
#include "base/check.h"
#include "net/socket_connect.h"
#include "transports/socket/socket_transport.h"

namespace accl {
namespace {

SocketPeer describeSocketPeer(const TransportSetup& ctx, int p) {
  const PeerInfo& info = (*ctx.peers)[p];
  return SocketPeer{ctx.rank, p, info.hostname, info.dataAddr.str(), ctx.me().ifname};
}

}  // namespace

NetTransport::NetTransport() = default;
NetTransport::~NetTransport() = default;

ncclResult_t NetTransport::publish(TransportSetup& ctx, PeerInfo* me) {
  // A data listener on the selected interface's address only, for the internal socket transport.
  net::SockAddr bound;
  NCCLCHECK(net::listenOn(ctx.dataIf->addr, &listener_, &bound));
  me->dataAddr = bound;
  return ncclSuccess;
}

ncclResult_t NetTransport::setup(TransportSetup& ctx, const std::vector<int>& peers) {
  if (peers.empty()) return ncclSuccess;
  net::NetChoice choice;
  NCCLCHECK(net::chooseNetModule(ctx.netName, ctx.locality, &choice));
  INFO(kSubsysInit | kSubsysNet, "rank %d: NET/%s: %s", ctx.rank, choice.module ? choice.module->name() : "Socket",
       choice.why.c_str());
  if (choice.module) return net::connectNetPeers(ctx, choice, peers, &plugin_);
  return connectSockets(ctx, peers);
}

ncclResult_t NetTransport::connectSockets(TransportSetup& ctx, const std::vector<int>& peers) {
  const PeerInfo& me = ctx.me();
  net::MeshSelf self{ctx.rank, ctx.bootstrap->magic(), ctx.nonce, me.hostname, me.ifname, me.dataAddr};
  std::vector<net::MeshPeer> mesh;
  for (int p : peers) mesh.push_back(net::MeshPeer{p, (*ctx.peers)[p].dataAddr, describeSocketPeer(ctx, p).describe()});
  const SocketLayout layout = socketLayout();
  const topo::CpuMask cpus = ctx.helperCpus ? *ctx.helperCpus : topo::CpuMask();
  return net::connectPeers(self, mesh, layout.nsocks(), listener_, ctx.abortFlag,
                           [&](int p, std::vector<net::Socket> socks) {
                             (*ctx.conns)[p] = makeSocketConnection(std::move(socks), ctx.ringBytes, layout, ctx.bell,
                                                                    describeSocketPeer(ctx, p), cpus);
                           });
}

ncclResult_t NetTransport::connect(TransportSetup& ctx, int peer, std::unique_ptr<PeerConnection>*) {
  WARN("rank %d: no network connection to %s: it was not set up at init", ctx.rank, ctx.describePeer(peer).c_str());
  return ncclInternalError;
}

}  // namespace accl
