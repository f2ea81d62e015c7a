// socket_connect.cc: opens and authenticates the striped data sockets to a socket peer.
#include "net/socket_connect.h"
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
    prepareDataSocket(socks[i]);
  }
  *out = std::move(socks);
  return ncclSuccess;
}

}  // namespace accl::net
