// reachability.cc: one TCP connect per peer, plus which local interface the route uses.
#include "topo/reachability.h"
#include <sys/socket.h>
#include <unistd.h>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include "net/socket.h"
#include "topo/ifaces.h"

namespace accl::topo {

using net::SockAddr;
using net::Socket;

namespace {

// The local interface the kernel routes `addr` through (a UDP connect sends nothing).
std::string routeInterface(const SockAddr& addr) {
  Socket probe(socket(addr.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!probe.valid() || connect(probe.fd(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0)
    return "no route";
  SockAddr local;
  local.len = sizeof(local.ss);
  if (getsockname(probe.fd(), reinterpret_cast<sockaddr*>(&local.ss), &local.len) != 0) return "?";
  local.setPort(0);
  std::string localText = local.str();
  for (const NetIf& nif : listInterfaces()) {
    if (nif.addr.str() == localText) return nif.name + " " + localText.substr(0, localText.rfind(':'));
  }
  return localText;
}

}  // namespace

bool checkPeer(const std::string& peer, int defaultPort, int timeoutMs) {
  std::string text = peer;
  bool hasPort = peer.front() == '[' ? peer.find("]:") != std::string::npos
                                     : peer.find(':') != std::string::npos && peer.find(':') == peer.rfind(':');
  if (!hasPort) text = (peer.find(':') != std::string::npos ? "[" + peer + "]" : peer) + ":" + std::to_string(defaultPort);
  SockAddr addr;
  if (net::parseHostPort(text.c_str(), &addr) != ncclSuccess) {
    std::printf("  %-28s UNKNOWN (cannot parse or resolve)\n", text.c_str());
    return false;
  }
  std::string via = routeInterface(addr);
  Socket s;
  std::string why;
  ncclResult_t res = net::connectWithin(addr, &s, timeoutMs, &why, nullptr, false);
  bool refusedOnce = res != ncclSuccess && why == strerror(ECONNREFUSED);
  bool answered = res == ncclSuccess || refusedOnce;
  std::printf("  %-28s %-12s via %-24s %s\n", addr.str().c_str(), answered ? "REACHABLE" : "UNREACHABLE", via.c_str(),
              res == ncclSuccess ? "(port open)" : ("(" + why + ")").c_str());
  return answered;
}

}  // namespace accl::topo
