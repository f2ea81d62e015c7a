// reachability.h: does a host answer on the network? A TCP connect tells without ICMP: accepted
// or refused means the host answered; no answer within the timeout means unreachable. Used by
// accl-info --peers. It lives in topo, not net, because it names the local interface the route
// uses (topo's interface list), and net sits below topo.
#pragma once
#include <string>

namespace accl::topo {

// `peer` is host or host:port ([v6]:port); defaultPort applies without a port. Prints one line
// naming the local interface the route to it uses; true if the host answered.
bool checkPeer(const std::string& peer, int defaultPort, int timeoutMs);

}  // namespace accl::topo
