// reachability.h: does a host answer on the network? A TCP connect tells without ICMP: accepted
// or refused means the host answered; no answer within the timeout means unreachable. Used by
// accl-info --peers.
#pragma once
#include <string>

namespace accl::net {

// `peer` is host or host:port ([v6]:port); defaultPort applies without a port. Prints one line
// naming the local interface the route to it uses; true if the host answered.
bool checkPeer(const std::string& peer, int defaultPort, int timeoutMs);

}  // namespace accl::net
