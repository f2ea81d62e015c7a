// socket_transport.h: connections between ranks on different hosts (or with
// NCCL_SHM_DISABLE=1) over one TCP connection per peer. Each direction has a local staging
// ring; progress() moves bytes between the rings and the kernel without blocking.
#pragma once
#include <memory>
#include "net/socket.h"
#include "transports/transport.h"

namespace accl {

std::unique_ptr<PeerConnection> makeSocketConnection(net::Socket sock, size_t ringBytes, int peerRank);

}  // namespace accl
