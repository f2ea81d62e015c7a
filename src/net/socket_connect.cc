// socket_connect.cc: establishes and authenticates the striped data sockets of every socket peer.
#include "net/socket_connect.h"
#include <poll.h>
#include <chrono>
#include <map>
#include "base/check.h"
#include "base/param.h"

namespace accl::net {
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

void prepare(const Socket& s) {
  tuneForBulk(s);
  failDeadLinkWithin(s, static_cast<int>(param::socketTimeoutMsec()));
}

ncclResult_t connectTo(const MeshSelf& self, const MeshPeer& peer, int nsocks, int timeoutMs,
                       const std::atomic<int>* abortFlag, const MeshConnected& connected) {
  std::vector<Socket> socks(static_cast<size_t>(nsocks));
  for (int i = 0; i < nsocks; i++) {
    std::string why;
    ncclResult_t res = connectWithin(peer.addr, &socks[i], timeoutMs, &why, abortFlag);
    if (res == ncclInternalError) return res;  // aborted
    if (res != ncclSuccess) {
      WARN("rank %d (host %s): cannot reach %s: %s. Check that both hosts use the same network "
           "(NCCL_SOCKET_IFNAME, `accl-info --peers %s`)",
           self.rank, self.hostname.c_str(), peer.name.c_str(), why.c_str(), peer.addr.str().c_str());
      return ncclRemoteError;
    }
    DataHandshake hs{self.magic, self.nonce, self.rank, i, nsocks, 0};
    NCCLCHECK(sendAll(socks[i], &hs, sizeof(hs), peer.name.c_str(), abortFlag, timeoutMs));
    prepare(socks[i]);
  }
  connected(peer.rank, std::move(socks));
  return ncclSuccess;
}

struct Waiting {
  const MeshPeer* peer;
  std::vector<Socket> socks;
};

std::string describeMissing(const std::map<int, Waiting>& waiting) {
  std::string text;
  for (const auto& [p, w] : waiting) {
    int have = 0;
    for (const auto& s : w.socks) have += s.valid();
    text += (text.empty() ? "" : "; ") + w.peer->name + " (" + std::to_string(have) + " of " +
            std::to_string(w.socks.size()) + " sockets arrived)";
  }
  return text;
}

}  // namespace

ncclResult_t connectPeers(const MeshSelf& self, const std::vector<MeshPeer>& peers, int nsocks,
                          const Socket& listener, const std::atomic<int>* abortFlag,
                          const MeshConnected& connected) {
  const int timeoutMs = static_cast<int>(param::socketConnectTimeoutMsec());
  std::map<int, Waiting> waiting;  // lower peers we accept from
  // connect() completes in the kernel backlog, so all connects first, then all accepts, cannot deadlock.
  for (const MeshPeer& peer : peers) {
    if (peer.rank < self.rank) {
      waiting[peer.rank] = Waiting{&peer, std::vector<Socket>(static_cast<size_t>(nsocks))};
      continue;
    }
    NCCLCHECK(connectTo(self, peer, nsocks, timeoutMs, abortFlag, connected));
  }
  // Peers connect in rank order, each within timeoutMs: wait a little longer than that.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2 * timeoutMs + 5000);
  while (!waiting.empty()) {
    if (abortFlag && abortFlag->load()) return ncclInternalError;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      WARN("rank %d (host %s): no data connection from %s within %d ms: those ranks cannot reach this host's "
           "%s (%s). Check NCCL_SOCKET_IFNAME on every host and `accl-info --peers`",
           self.rank, self.hostname.c_str(), describeMissing(waiting).c_str(), 2 * timeoutMs + 5000,
           self.ifname.c_str(), self.addr.str().c_str());
      return ncclRemoteError;
    }
    pollfd pfd{listener.fd(), POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 100))) <= 0) continue;
    Socket s;
    NCCLCHECK(acceptOne(listener, &s, 1000, abortFlag));
    DataHandshake hs{};
    bool valid = recvAll(s, &hs, sizeof(hs), "incoming data connection", abortFlag, 5000) == ncclSuccess &&
                 hs.magic == self.magic && hs.nonce == self.nonce && waiting.count(hs.rank) != 0 &&
                 hs.nsocks == nsocks && hs.sockIndex >= 0 && hs.sockIndex < hs.nsocks &&
                 !waiting[hs.rank].socks[hs.sockIndex].valid();
    if (!valid) {
      if (hs.nsocks != nsocks && hs.magic == self.magic) {
        WARN("rank %d: rank %d opens %d sockets per peer, this rank %d: set NCCL_SOCKET_NTHREADS and "
             "NCCL_NSOCKS_PERTHREAD alike on every rank",
             self.rank, hs.rank, hs.nsocks, nsocks);
        return ncclInvalidUsage;
      }
      WARN("rank %d: dropped a data connection with a wrong handshake (stray or foreign process)", self.rank);
      continue;
    }
    prepare(s);
    auto& socks = waiting[hs.rank].socks;
    socks[hs.sockIndex] = std::move(s);
    bool complete = true;
    for (const auto& sock : socks) complete &= sock.valid();
    if (!complete) continue;
    connected(hs.rank, std::move(socks));
    waiting.erase(hs.rank);
  }
  return ncclSuccess;
}

}  // namespace accl::net
