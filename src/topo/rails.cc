// rails.cc: which admitted interfaces are rails of one network. Clusters give each host two
// network planes (hpn0 and hpn1, dual-port NICs on two switches); a connection between two
// hosts then stripes over both and survives losing one (transports/socket).
#include <algorithm>
#include <cctype>
#include "topo/ifaces.h"

namespace accl::topo {

std::string interfaceStem(const std::string& name) {
  size_t end = name.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(name[end - 1]))) end--;
  return name.substr(0, end);
}

std::vector<NetIf> railsOf(const std::vector<NetIf>& admitted, size_t chosen, int maxRails) {
  const NetIf& main = admitted.at(chosen);
  std::vector<NetIf> rails;
  if (maxRails > 1 && !isLoopback(main.addr)) {
    const std::string stem = interfaceStem(main.name);
    for (const NetIf& nif : admitted) {
      if (!nif.running || isLoopback(nif.addr) || nif.addr.family() != main.addr.family()) continue;
      if (interfaceStem(nif.name) != stem) continue;
      bool taken = false;
      for (const NetIf& r : rails) taken |= r.name == nif.name;
      if (!taken) rails.push_back(nif);
    }
    // Name order on every host, so rail r pairs the same plane (hpn1 with hpn1) on both ends.
    std::sort(rails.begin(), rails.end(), [](const NetIf& a, const NetIf& b) { return a.name < b.name; });
    if (static_cast<int>(rails.size()) > maxRails) {
      // Keep the chosen interface among the first maxRails.
      auto it = std::find_if(rails.begin(), rails.end(), [&](const NetIf& r) { return r.name == main.name; });
      if (it - rails.begin() >= maxRails) std::rotate(rails.begin() + maxRails - 1, it, it + 1);
      rails.resize(static_cast<size_t>(maxRails));
    }
  }
  if (rails.size() <= 1) rails.assign(1, main);
  return rails;
}

}  // namespace accl::topo
