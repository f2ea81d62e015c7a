// socket_connect.cc: opens and authenticates the striped data sockets to a socket peer.
#include "net/socket_connect.h"
#include <algorithm>
#include "base/check.h"
#include "base/param.h"

namespace accl::net {

void prepareDataSocket(const Socket& s) {
  tuneForBulk(s);
  failDeadLinkWithin(s, static_cast<int>(param::socketTimeoutMsec()));
}

ncclResult_t connectDataSockets(const MeshSelf& self, const MeshPeer& peer, int nsocks,
                                const std::atomic<int>* abortFlag, std::vector<Socket>* out) {
  const int timeoutMs = static_cast<int>(param::socketConnectTimeoutMsec());
  std::vector<Socket> socks(static_cast<size_t>(nsocks));
  const int rails = peer.railAddrs.empty() ? 1 : static_cast<int>(peer.railAddrs.size());
  const int perRail = std::max(1, nsocks / rails);
  for (int i = 0; i < nsocks; i++) {
    std::string why;
    const int rail = peer.railAddrs.empty() ? -1 : std::min(i / perRail, rails - 1);
    const SockAddr& to = rail < 0 ? peer.addr : peer.railAddrs[static_cast<size_t>(rail)];
    const SockAddr* from = rail >= 0 && static_cast<size_t>(rail) < self.railAddrs.size()
                               ? &self.railAddrs[static_cast<size_t>(rail)]
                               : nullptr;
    const std::string& name =
        rail >= 0 && static_cast<size_t>(rail) < peer.railNames.size() ? peer.railNames[static_cast<size_t>(rail)] : peer.name;
    ncclResult_t res = connectWithin(to, &socks[i], timeoutMs, &why, abortFlag, true, from);
    if (res == ncclInternalError) return res;  // aborted
    if (res != ncclSuccess) {
      WARN("rank %d (host %s): cannot reach %s: %s. Check that both hosts use the same network "
           "(NCCL_SOCKET_IFNAME, `accl-info --peers %s`)",
           self.rank, self.hostname.c_str(), name.c_str(), why.c_str(), to.str().c_str());
      return ncclRemoteError;
    }
    DataHandshake hs{self.magic, self.nonce, self.rank, i, nsocks, 0, 0};
    NCCLCHECK(sendAll(socks[i], &hs, sizeof(hs), name.c_str(), abortFlag, timeoutMs));
    prepareDataSocket(socks[i]);
  }
  *out = std::move(socks);
  return ncclSuccess;
}

}  // namespace accl::net
