// net_transport.cc: sockets (lazy, see net_transport.h) or a net plugin between hosts.
#include "transports/net/net_transport.h"
#include <algorithm>
#include <cstring>
#include "base/check.h"
#include "base/param.h"
#include "bootstrap/acceptor.h"

namespace accl {
namespace {

int railsBetween(const PeerInfo& a, const PeerInfo& b) {
  return std::clamp(std::min(a.nrails, b.nrails), 1, kMaxSocketRails);
}

std::string fixedText(const char* s, size_t cap) { return std::string(s, strnlen(s, cap)); }

SocketPeer describeSocketPeer(const std::vector<PeerInfo>& peers, int me, int p, int socksPerRail) {
  const PeerInfo& info = peers[p];
  SocketPeer who(me, p, info.hostname, info.dataAddr.str(), peers[me].ifname);
  const int rails = railsBetween(peers[me], info);
  if (rails > 1) {
    for (int r = 0; r < rails; r++) {
      who.railAddrs.push_back(info.railAddr[r].str());
      who.railIfnames.push_back(fixedText(peers[me].railIfname[r], sizeof(peers[me].railIfname[r])));
    }
    who.socksPerRail = socksPerRail;
  }
  return who;
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
  for (auto& l : listeners_) l.shutdownBoth();  // wakes the acceptors' poll
  for (auto& t : acceptors_)
    if (t.joinable()) t.join();
}

ncclResult_t NetTransport::publish(TransportSetup& ctx, PeerInfo* me) {
  // A data listener on each rail's address only (the selected interface's when it is alone),
  // for the internal socket transport.
  std::vector<topo::NetIf> rails = ctx.rails ? *ctx.rails : std::vector<topo::NetIf>{*ctx.dataIf};
  if (rails.empty() || static_cast<int>(rails.size()) > kMaxSocketRails) rails.assign(1, *ctx.dataIf);
  me->nrails = static_cast<int32_t>(rails.size());
  listeners_.resize(rails.size());
  me->dataAddr = net::SockAddr{};
  for (size_t r = 0; r < rails.size(); r++) {
    net::SockAddr bound;
    NCCLCHECK(net::listenOn(rails[r].addr, &listeners_[r], &bound));
    me->railAddr[r] = bound;
    std::memset(me->railIfname[r], 0, sizeof(me->railIfname[r]));
    rails[r].name.copy(me->railIfname[r], sizeof(me->railIfname[r]) - 1);
    if (rails[r].name == ctx.dataIf->name) me->dataAddr = bound;
  }
  if (me->dataAddr.len == 0) me->dataAddr = me->railAddr[0];
  return ncclSuccess;
}

SocketLayout NetTransport::layoutFor(int peer) const {
  SocketLayout layout = layout_;
  layout.nrails = railsBetween((*peers_)[static_cast<size_t>(self_.rank)], (*peers_)[static_cast<size_t>(peer)]);
  return layout;
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
  self_ = net::MeshSelf{ctx.rank, ctx.bootstrap->magic(), ctx.nonce, me.hostname, me.ifname, me.dataAddr, {}};
  for (int r = 0; r < std::clamp(me.nrails, 1, kMaxSocketRails); r++) self_.railAddrs.push_back(me.railAddr[r]);
  peers_ = ctx.peers;
  layout_ = socketLayout();
  ringBytes_ = ctx.ringBytes;
  bell_ = ctx.bell;
  if (ctx.helperCpus) cpus_ = *ctx.helperCpus;
  mine_.assign(static_cast<size_t>(ctx.nranks), false);
  for (int p : peers) {
    mine_[static_cast<size_t>(p)] = true;
    lowerPeers_ += p < ctx.rank;
    const SocketLayout layout = layoutFor(p);
    if (layout.nrails > 1) {
      const PeerInfo& peer = (*peers_)[static_cast<size_t>(p)];
      std::string list;
      for (int r = 0; r < layout.nrails; r++)
        list += std::string(list.empty() ? "" : ", ") + fixedText(me.railIfname[r], sizeof(me.railIfname[r])) + " (" +
                me.railAddr[r].str() + ") -> " + peer.railAddr[r].str();
      INFO(kSubsysInit | kSubsysNet, "rank %d: NET/Socket: %d rails to rank %d (host %s): %s; %d socket(s) on %d thread(s) per rail",
           ctx.rank, layout.nrails, p, peer.hostname, list.c_str(), layout.perRail(), layout.nthreads);
    }
  }
  rails_ = std::clamp(me.nrails, 1, kMaxSocketRails) > 1;
  // With several rails also for higher peers only: their notices that a rail failed come here.
  if (lowerPeers_ > 0 || rails_) {
    for (size_t r = 0; r < listeners_.size(); r++) {
      acceptors_.emplace_back([this, r] {
        cpus_.applyToCurrentThread();
        acceptLoop(listeners_[r], static_cast<int>(r));
      });
    }
  }
  return ncclSuccess;
}

std::shared_ptr<SocketConnection> NetTransport::incomingConnection(int peer) {
  Incoming& in = incoming_[peer];
  if (!in.conn) {
    const SocketLayout layout = layoutFor(peer);
    const SocketPeer who = describeSocketPeer(*peers_, self_.rank, peer, layout.perRail());
    in.conn = makeSocketConnection(ringBytes_, layout, bell_, who, cpus_);
    if (layout.nrails > 1) {
      // The peer redials; we tell it at once when our end of a stripe fails (rail_failover.cc).
      SocketLink::Redial redial;
      std::vector<net::SockAddr> to;
      for (int r = 0; r < layout.nrails; r++) to.push_back((*peers_)[static_cast<size_t>(peer)].railAddr[r]);
      redial.notify = [self = self_, to, nsocks = layout.nsocks(), name = who.describe()](int rail, int s,
                                                                                            int lostRail) {
        net::Socket sock;
        std::string why;
        const net::SockAddr* local =
            static_cast<size_t>(rail) < self.railAddrs.size() ? &self.railAddrs[static_cast<size_t>(rail)] : nullptr;
        if (net::connectWithin(to[static_cast<size_t>(rail)], &sock, 500, &why, nullptr, false, local) != ncclSuccess) {
          INFO(kSubsysNet, "rank %d: cannot tell %s that its socket %d failed: %s", self.rank, name.c_str(), s,
               why.c_str());
          return ncclRemoteError;
        }
        net::DataHandshake hs{self.magic, self.nonce, self.rank, s, nsocks, 2, static_cast<uint64_t>(lostRail)};
        return net::sendAll(sock, &hs, sizeof(hs), name.c_str(), nullptr, 500);
      };
      in.conn->setRedial(std::move(redial));
    }
  }
  return in.conn;
}

void NetTransport::acceptLoop(const net::Socket& listener, int rail) {
  boot::HandshakeAcceptor acceptor(listener, self_.magic, sizeof(net::DataHandshake),
                                   "rank " + std::to_string(self_.rank) + " data listener");
  for (;;) {
    boot::HandshakeAcceptor::Arrival a;
    ncclResult_t res = acceptor.next(&a, &stopAcceptor_, -1);
    if (res != ncclSuccess) return;  // stopped (or the listener failed: logged by the acceptor)
    net::DataHandshake hs;
    std::memcpy(&hs, a.header.data(), sizeof(hs));
    std::lock_guard<std::mutex> lk(mu_);
    if (lowerPeers_ == 0 && !rails_) return;  // another rail's acceptor saw the last peer arrive
    if (hs.resume == 2) {
      // A higher rank's end of one of our sockets failed: replace it now (closing this one).
      auto it = outgoing_.find(hs.rank);
      std::shared_ptr<SocketConnection> conn = it == outgoing_.end() ? nullptr : it->second.lock();
      const bool valid = hs.nonce == self_.nonce && hs.rank > self_.rank &&
                         hs.resumeFrom < static_cast<uint64_t>(kMaxSocketRails);
      if (valid && conn) conn->peerLost(hs.sockIndex, static_cast<int>(hs.resumeFrom));
      continue;
    }
    const bool known = hs.nonce == self_.nonce && hs.rank >= 0 && hs.rank < self_.rank &&
                       static_cast<size_t>(hs.rank) < mine_.size() && mine_[static_cast<size_t>(hs.rank)];
    if (known && hs.resume == 1) {
      // A socket of an existing connection comes back on this rail (its rail failed or returned).
      auto it = incoming_.find(hs.rank);
      net::prepareDataSocket(a.sock);
      if (it == incoming_.end() || !it->second.attached || !it->second.conn ||
          it->second.conn->acceptResume(hs.sockIndex, rail, std::move(a.sock), hs.resumeFrom) != ncclSuccess)
        WARN("rank %d: rank %d could not move its socket %d onto this rail", self_.rank, hs.rank, hs.sockIndex);
      continue;
    }
    const int nsocks = known ? layoutFor(hs.rank).nsocks() : 0;
    if (known && hs.nsocks != nsocks) {
      WARN("rank %d: rank %d opens %d sockets per peer, this rank %d: set NCCL_SOCKET_NTHREADS, "
           "NCCL_NSOCKS_PERTHREAD and ACCL_SOCKET_RAILS alike on every rank",
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
    if (--lowerPeers_ == 0 && !rails_) {
      // Everyone arrived; later strays wait in the backlog. The other rails' acceptors stop.
      stopAcceptor_.store(1);
      return;
    }
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
  const SocketLayout layout = layoutFor(peer);
  const SocketPeer who = describeSocketPeer(*peers_, ctx.rank, peer, layout.perRail());
  net::MeshPeer to{peer, (*peers_)[peer].dataAddr, who.describe(), {}, {}};
  if (layout.nrails > 1) {
    for (int r = 0; r < layout.nrails; r++) {
      to.railAddrs.push_back((*peers_)[peer].railAddr[r]);
      to.railNames.push_back(who.describeSocket(r * layout.perRail()));
    }
  }
  net::MeshSelf self = self_;
  self.railAddrs.resize(to.railAddrs.size());
  std::vector<net::Socket> socks;
  NCCLCHECK(net::connectDataSockets(self, to, layout.nsocks(), ctx.abortFlag, &socks));
  std::shared_ptr<SocketConnection> conn = makeSocketConnection(ringBytes_, layout, bell_, who, cpus_);
  if (layout.nrails > 1) {
    // A lost socket comes back on another rail: connect from our address there to the peer's.
    const std::atomic<int>* abortFlag = ctx.abortFlag;
    SocketLink::Redial redial;
    redial.connect = [self, to, abortFlag](int rail, int timeoutMs, net::Socket* out) {
      std::string why;
      ncclResult_t res = net::connectWithin(to.railAddrs[static_cast<size_t>(rail)], out, timeoutMs, &why, abortFlag,
                                            false, &self.railAddrs[static_cast<size_t>(rail)]);
      if (res != ncclSuccess) {
        INFO(kSubsysNet, "rank %d: %s does not answer: %s", self.rank, to.railNames[static_cast<size_t>(rail)].c_str(),
             why.c_str());
        return res;
      }
      net::prepareDataSocket(*out);
      return ncclSuccess;
    };
    const int nsocks = layout.nsocks();
    redial.resume = [self, nsocks, name = who.describe()](const net::Socket& sock, int s, uint64_t myPos,
                                                         uint64_t* peerPos) {
      net::DataHandshake hs{self.magic, self.nonce, self.rank, s, nsocks, 1, myPos};
      const int timeoutMs = static_cast<int>(param::railTimeoutMsec());
      NCCLCHECK(net::sendAll(sock, &hs, sizeof(hs), name.c_str(), nullptr, timeoutMs));
      return net::recvAll(sock, peerPos, sizeof(*peerPos), name.c_str(), nullptr, timeoutMs);
    };
    conn->setRedial(std::move(redial));
  }
  conn->attach(std::move(socks));
  if (layout.nrails > 1) {
    std::lock_guard<std::mutex> lk(mu_);
    outgoing_[peer] = conn;  // for the peer's notices (acceptLoop)
  }
  *out = std::make_unique<SharedConnection>(std::move(conn));
  return ncclSuccess;
}

}  // namespace accl
