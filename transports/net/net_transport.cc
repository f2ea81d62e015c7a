// net_transport.cc: sockets (lazy, see net_transport.h) or a net plugin between hosts.
#include "transports/net/net_transport.h"
#include <cstring>
#include "base/check.h"
#include "bootstrap/acceptor.h"

namespace accl {
namespace {

SocketPeer describeSocketPeer(const std::vector<PeerInfo>& peers, int me, int p) {
  const PeerInfo& info = peers[p];
  return SocketPeer{me, p, info.hostname, info.dataAddr.str(), peers[me].ifname};
}

// The communicator's handle on a connection the acceptor may still be filling: both hold it.
class SharedConnection final : public PeerConnection {
 public:
  explicit SharedConnection(std::shared_ptr<SocketConnection> c) : c_(std::move(c)) {}
  SendChannel* send() override { return c_->send(); }
  RecvChannel* recv() override { return c_->recv(); }
  void close(int culprit) override { c_->close(culprit); }
  void depart(int myRank) override { c_->depart(myRank); }
  int reportedCulprit() const override { return c_->reportedCulprit(); }
  int closedByPeer() const override { return c_->closedByPeer(); }
  const char* transportName() const override { return c_->transportName(); }
  void ownerSleeps(bool asleep) override { c_->ownerSleeps(asleep); }

 private:
  std::shared_ptr<SocketConnection> c_;
};

}  // namespace

NetTransport::NetTransport() = default;

NetTransport::~NetTransport() {
  stopAcceptor_.store(1);
  listener_.shutdownBoth();  // wakes the acceptor's poll
  if (acceptor_.joinable()) acceptor_.join();
}

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

  // Internal sockets: nothing connects here; remember what connect() and the acceptor need.
  const PeerInfo& me = ctx.me();
  sockets_ = true;
  self_ = net::MeshSelf{ctx.rank, ctx.bootstrap->magic(), ctx.nonce, me.hostname, me.ifname, me.dataAddr};
  peers_ = ctx.peers;
  layout_ = socketLayout();
  ringBytes_ = ctx.ringBytes;
  bell_ = ctx.bell;
  if (ctx.helperCpus) cpus_ = *ctx.helperCpus;
  pinHost_ = ctx.pinHost;
  mine_.assign(static_cast<size_t>(ctx.nranks), false);
  for (int p : peers) {
    mine_[static_cast<size_t>(p)] = true;
    lowerPeers_ += p < ctx.rank;
  }
  if (lowerPeers_ > 0) {
    acceptor_ = std::thread([this] {
      cpus_.applyToCurrentThread();
      acceptLoop();
    });
  }
  return ncclSuccess;
}

std::shared_ptr<SocketConnection> NetTransport::incomingConnection(int peer) {
  Incoming& in = incoming_[peer];
  if (!in.conn)
    in.conn = makeSocketConnection(ringBytes_, layout_, bell_, describeSocketPeer(*peers_, self_.rank, peer), cpus_,
                                   pinHost_);
  return in.conn;
}

void NetTransport::acceptLoop() {
  boot::HandshakeAcceptor acceptor(listener_, self_.magic, sizeof(net::DataHandshake),
                                   "rank " + std::to_string(self_.rank) + " data listener");
  const int nsocks = layout_.nsocks();
  for (;;) {
    boot::HandshakeAcceptor::Arrival a;
    ncclResult_t res = acceptor.next(&a, &stopAcceptor_, -1);
    if (res != ncclSuccess) return;  // stopped (or the listener failed: logged by the acceptor)
    net::DataHandshake hs;
    std::memcpy(&hs, a.header.data(), sizeof(hs));
    std::lock_guard<std::mutex> lk(mu_);
    const bool known = hs.nonce == self_.nonce && hs.rank >= 0 && hs.rank < self_.rank &&
                       static_cast<size_t>(hs.rank) < mine_.size() && mine_[static_cast<size_t>(hs.rank)];
    if (known && hs.nsocks != nsocks) {
      WARN("rank %d: rank %d opens %d sockets per peer, this rank %d: set NCCL_SOCKET_NTHREADS and "
           "NCCL_NSOCKS_PERTHREAD alike on every rank",
           self_.rank, hs.rank, hs.nsocks, nsocks);
      incomingConnection(hs.rank)->close(-1);
      continue;
    }
    Incoming* in = known ? &incoming_[hs.rank] : nullptr;
    if (in && in->socks.empty()) in->socks.resize(static_cast<size_t>(nsocks));
    if (!in || in->attached || hs.sockIndex < 0 || hs.sockIndex >= nsocks ||
        in->socks[static_cast<size_t>(hs.sockIndex)].valid()) {
      WARN("rank %d: dropped a data connection from %s with a wrong handshake (stray or foreign process)",
           self_.rank, a.from.c_str());
      continue;
    }
    net::prepareDataSocket(a.sock);
    in->socks[static_cast<size_t>(hs.sockIndex)] = std::move(a.sock);
    bool complete = true;
    for (const auto& s : in->socks) complete &= s.valid();
    if (!complete) continue;
    // Made here if this rank has not used the pair yet: its receive ring fills meanwhile.
    incomingConnection(hs.rank)->attach(std::move(in->socks));
    in->attached = true;
    if (--lowerPeers_ == 0) return;  // everyone arrived; later strays wait in the backlog
  }
}

ncclResult_t NetTransport::connect(TransportSetup& ctx, int peer, std::unique_ptr<PeerConnection>* out) {
  if (!sockets_ || peer < 0 || static_cast<size_t>(peer) >= mine_.size() || !mine_[static_cast<size_t>(peer)]) {
    WARN("rank %d: no network connection to %s: it was not set up at init", ctx.rank, ctx.describePeer(peer).c_str());
    return ncclInternalError;
  }
  if (peer < ctx.rank) {
    std::lock_guard<std::mutex> lk(mu_);
    *out = std::make_unique<SharedConnection>(incomingConnection(peer));
    return ncclSuccess;
  }
  const SocketPeer who = describeSocketPeer(*peers_, ctx.rank, peer);
  std::vector<net::Socket> socks;
  NCCLCHECK(net::connectDataSockets(self_, net::MeshPeer{peer, (*peers_)[peer].dataAddr, who.describe()},
                                    layout_.nsocks(), ctx.abortFlag, &socks));
  std::unique_ptr<SocketConnection> conn = makeSocketConnection(ringBytes_, layout_, bell_, who, cpus_, pinHost_);
  conn->attach(std::move(socks));
  *out = std::move(conn);
  return ncclSuccess;
}

}  // namespace accl
