// socket_link.cc: shared state of a striped socket connection, and how its failures are told.
#include "transports/socket/socket_link.h"
#include <algorithm>
#include "base/log.h"
#include "topo/ifaces.h"

namespace accl {

namespace {

// Why a connection may have died, from our side: the interface it uses went away.
std::string localInterfaceState(const std::string& ifname) {
  if (ifname.empty()) return "";
  bool present = false;
  for (const topo::NetIf& nif : topo::listInterfaces()) {
    if (nif.name != ifname) continue;
    present = true;
    if (nif.running) return "";
  }
  return present ? "; local interface " + ifname + " is down" : "; local interface " + ifname + " has no address";
}

}  // namespace

std::string SocketPeer::describe() const {
  return "rank " + std::to_string(rank) + " (host " + (host.empty() ? "?" : host) + ", " + addr + ", interface " +
         (ifname.empty() ? "?" : ifname) + ")";
}

StreamDir::StreamDir(size_t cap, const Stripe& stripe)
    : ring(cap), cursor(new std::atomic<uint64_t>[static_cast<size_t>(stripe.nsocks)]), nsocks(stripe.nsocks) {
  for (int s = 0; s < nsocks; s++) cursor[s].store(stripe.firstPos(s), std::memory_order_relaxed);
}

void StreamDir::publishMin(std::atomic<uint64_t>& end) const {
  uint64_t low = cursor[0].load(std::memory_order_acquire);
  for (int s = 1; s < nsocks; s++) low = std::min(low, cursor[s].load(std::memory_order_acquire));
  uint64_t cur = end.load(std::memory_order_relaxed);
  while (cur < low && !end.compare_exchange_weak(cur, low, std::memory_order_seq_cst)) {
  }
}

SocketLink::SocketLink(std::vector<net::Socket> sockets, size_t ringBytes, const Stripe& st, Doorbell* b,
                       SocketPeer p)
    : socks(std::move(sockets)),
      stripe(st),
      out(ringBytes, st),
      in(ringBytes, st),
      bell(b),
      peer(std::move(p)),
      eof(new std::atomic<bool>[static_cast<size_t>(st.nsocks)]) {
  for (int s = 0; s < st.nsocks; s++) eof[s].store(false, std::memory_order_relaxed);
}

void SocketLink::fail(int result, const std::string& what) {
  int expected = 0;
  if (error.compare_exchange_strong(expected, result) && !closedLocally.load()) {
    WARN("rank %d: socket connection to %s failed: %s%s", peer.myRank, peer.describe().c_str(), what.c_str(),
         localInterfaceState(peer.ifname).c_str());
  }
  ringDoorbell(bell);
}

bool SocketLink::blockedOnEof() const {
  uint64_t tail = in.ring.tail.load(std::memory_order_acquire);
  return eof[stripe.socketOf(tail)].load(std::memory_order_acquire);
}

}  // namespace accl
