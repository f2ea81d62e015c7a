// list_interfaces.cc: the host's IP interfaces from getifaddrs, in enumeration order.
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <bit>
#include <cstring>
#include <utility>
#include "topo/ifaces.h"

namespace accl::topo {

namespace {

int prefixLenOf(const sockaddr* mask) {
  if (mask == nullptr) return 0;
  const unsigned char* bytes = nullptr;
  size_t n = 0;
  if (mask->sa_family == AF_INET) {
    bytes = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    n = 4;
  } else if (mask->sa_family == AF_INET6) {
    bytes = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
    n = 16;
  }
  int bits = 0;
  for (size_t i = 0; i < n; ++i) bits += std::popcount(static_cast<unsigned>(bytes[i]));
  return bits;
}

}  // namespace

std::vector<NetIf> listInterfaces() {
  std::vector<NetIf> result;
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return result;
  for (ifaddrs* ifa = all; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6 &&
        IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr)) {
      continue;
    }
    bool seen = false;  // keep the first address of each (interface, family)
    for (const NetIf& nif : result) seen |= nif.name == ifa->ifa_name && nif.addr.family() == family;
    if (seen) continue;
    NetIf nif;
    nif.name = ifa->ifa_name;
    nif.addr.len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&nif.addr.ss, ifa->ifa_addr, nif.addr.len);
    nif.addr.setPort(0);
    nif.running = (ifa->ifa_flags & IFF_UP) && (ifa->ifa_flags & IFF_RUNNING);
    nif.prefixLen = prefixLenOf(ifa->ifa_netmask);
    result.push_back(std::move(nif));
  }
  freeifaddrs(all);
  return result;
}

}  // namespace accl::topo
