#include "transports/peer_info.h"
#include <cstring>

namespace accl {

std::string describePeer(const std::vector<PeerInfo>& peers, int peer) {
  std::string d = "rank " + std::to_string(peer);
  if (peer < 0 || peer >= static_cast<int>(peers.size())) return d;
  const PeerInfo& p = peers[peer];
  return d + " (host " + std::string(p.hostname, strnlen(p.hostname, sizeof(p.hostname))) + ", " + p.dataAddr.str() +
         ", interface " + std::string(p.ifname, strnlen(p.ifname, sizeof(p.ifname))) + ")";
}

}  // namespace accl
