// socket_connect.cc: establishes and authenticates the striped data sockets of every socket peer.
#include "core/socket_connect.h"
#include <poll.h>
#include <chrono>
#include <map>
#include "core/check.h"
#include "core/param.h"
#include "transports/socket/socket_transport.h"

namespace accl {
namespace {

// First bytes of every data socket: who is calling, for which communicator, which stripe.
struct DataHandshake {
  uint64_t magic;
  uint64_t nonce;
  int32_t rank;
  int32_t sockIndex;
  int32_t nsocks;
  int32_t pad;
};

SocketPeer describePeer(const Comm* c, int p) {
  const PeerInfo& info = c->peers[p];
  return SocketPeer{c->rank, p, info.hostname, info.dataAddr.str(), c->peers[c->rank].ifname};
}

void prepare(const net::Socket& s) {
  net::tuneForBulk(s);
  net::failDeadLinkWithin(s, static_cast<int>(param::socketTimeoutMsec()));
}

ncclResult_t connectTo(Comm* c, int p, const SocketLayout& layout, int timeoutMs) {
  const PeerInfo& me = c->peers[c->rank];
  SocketPeer peer = describePeer(c, p);
  std::vector<net::Socket> socks(static_cast<size_t>(layout.nsocks()));
  for (int i = 0; i < layout.nsocks(); i++) {
    std::string why;
    ncclResult_t res = net::connectWithin(c->peers[p].dataAddr, &socks[i], timeoutMs, &why, &c->abortFlag);
    if (res == ncclInternalError) return res;  // aborted
    if (res != ncclSuccess) {
      WARN("rank %d (host %s): cannot reach %s: %s. Check that both hosts use the same network "
           "(NCCL_SOCKET_IFNAME, `accl-info --peers %s`)",
           c->rank, me.hostname, peer.describe().c_str(), why.c_str(), c->peers[p].dataAddr.str().c_str());
      return ncclRemoteError;
    }
    DataHandshake hs{c->bootstrap->magic(), c->nonce, c->rank, i, layout.nsocks(), 0};
    std::string desc = peer.describe();
    NCCLCHECK(net::sendAll(socks[i], &hs, sizeof(hs), desc.c_str(), &c->abortFlag, timeoutMs));
    prepare(socks[i]);
  }
  c->conns[p] = makeSocketConnection(std::move(socks), c->ringBytes, layout, c->bell(), peer);
  return ncclSuccess;
}

std::string describeMissing(const Comm* c, const std::map<int, std::vector<net::Socket>>& waiting) {
  std::string text;
  for (const auto& [p, socks] : waiting) {
    int have = 0;
    for (const auto& s : socks) have += s.valid();
    text += (text.empty() ? "" : "; ") + describePeer(c, p).describe() + " (" + std::to_string(have) + " of " +
            std::to_string(socks.size()) + " sockets arrived)";
  }
  return text;
}

}  // namespace

ncclResult_t connectSocketPeers(Comm* c, const std::vector<int>& peers, const net::Socket& listener) {
  const SocketLayout layout = socketLayout();
  const int timeoutMs = static_cast<int>(param::socketConnectTimeoutMsec());
  std::map<int, std::vector<net::Socket>> waiting;  // lower peers we accept from
  // connect() completes in the kernel backlog, so all connects first, then all accepts, cannot deadlock.
  for (int p : peers) {
    if (p < c->rank) {
      waiting[p].resize(static_cast<size_t>(layout.nsocks()));
      continue;
    }
    NCCLCHECK(connectTo(c, p, layout, timeoutMs));
  }
  // Peers connect in rank order, each within timeoutMs: wait a little longer than that.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2 * timeoutMs + 5000);
  while (!waiting.empty()) {
    if (c->abortFlag.load()) return ncclInternalError;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      WARN("rank %d (host %s): no data connection from %s within %d ms: those ranks cannot reach this host's "
           "%s (%s). Check NCCL_SOCKET_IFNAME on every host and `accl-info --peers`",
           c->rank, c->peers[c->rank].hostname, describeMissing(c, waiting).c_str(), 2 * timeoutMs + 5000,
           c->peers[c->rank].ifname, c->peers[c->rank].dataAddr.str().c_str());
      return ncclRemoteError;
    }
    pollfd pfd{listener.fd(), POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 100))) <= 0) continue;
    net::Socket s;
    NCCLCHECK(net::acceptOne(listener, &s, 1000, &c->abortFlag));
    DataHandshake hs{};
    bool valid = net::recvAll(s, &hs, sizeof(hs), "incoming data connection", &c->abortFlag, 5000) == ncclSuccess &&
                 hs.magic == c->bootstrap->magic() && hs.nonce == c->nonce && waiting.count(hs.rank) != 0 &&
                 hs.nsocks == layout.nsocks() && hs.sockIndex >= 0 && hs.sockIndex < hs.nsocks &&
                 !waiting[hs.rank][hs.sockIndex].valid();
    if (!valid) {
      if (hs.nsocks != layout.nsocks() && hs.magic == c->bootstrap->magic()) {
        WARN("rank %d: rank %d opens %d sockets per peer, this rank %d: set NCCL_SOCKET_NTHREADS and "
             "NCCL_NSOCKS_PERTHREAD alike on every rank",
             c->rank, hs.rank, hs.nsocks, layout.nsocks());
        return ncclInvalidUsage;
      }
      WARN("rank %d: dropped a data connection with a wrong handshake (stray or foreign process)", c->rank);
      continue;
    }
    prepare(s);
    auto& socks = waiting[hs.rank];
    socks[hs.sockIndex] = std::move(s);
    bool complete = true;
    for (const auto& sock : socks) complete &= sock.valid();
    if (!complete) continue;
    c->conns[hs.rank] = makeSocketConnection(std::move(socks), c->ringBytes, layout, c->bell(), describePeer(c, hs.rank));
    waiting.erase(hs.rank);
  }
  return ncclSuccess;
}

}  // namespace accl
