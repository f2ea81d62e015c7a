// socket_connect.h: at init, the TCP data connections to peers on other hosts. Lower rank
// connects, higher rank accepts; each pair opens socketLayout().nsocks() sockets. Both sides
// are bounded by ACCL_SOCKET_CONNECT_TIMEOUT_MSEC, so an unreachable peer fails init quickly
// with a WARN naming it (rank, host, address, interface) instead of hanging.
#pragma once
#include <vector>
#include "core/comm.h"

namespace accl {

ncclResult_t connectSocketPeers(Comm* c, const std::vector<int>& peers, const net::Socket& listener);

}  // namespace accl
