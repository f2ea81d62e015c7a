// socket_net.h: the socket transport as an ncclNet-shaped module ("Socket"), for hosts that
// load net plugins: ACCL exports it as libnccl-net-accl.so (plugins/net_accl/), so any
// NCCL-compatible host gets ACCL's interface choice (NCCL_SOCKET_IFNAME, the HPN rule). One TCP
// connection per comm; a message is an 8-byte length and the payload; requests complete in
// order and move bytes inside test(). Inside ACCL itself the socket transport keeps its native
// striped byte ring (socket_transport.h), which needs no per-message calls.
#pragma once
#include <memory>
#include "transports/net/net_module.h"

namespace accl::net {

std::unique_ptr<NetModule> makeSocketNetModule();

}  // namespace accl::net
