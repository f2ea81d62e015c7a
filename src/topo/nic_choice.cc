// nic_choice.cc: the network device closest to a rank (see nic_choice.h).
#include "topo/nic_choice.h"
#include <limits.h>
#include <stdlib.h>
#include <algorithm>
#include <cctype>
#include <memory>

namespace accl::topo {
namespace {

constexpr long kUnknown = LONG_MAX;

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool looksLikeBusId(const std::string& s) {
  // dddd:bb:dd.f, hexadecimal
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i = 0; i < s.size(); i++)
    if (i != 4 && i != 7 && i != 10 && !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

const PciDevice* findDevice(const HwTopology& t, const NicCandidate& c) {
  if (const PciDevice* d = c.busId.empty() ? nullptr : findPciDevice(t, c.busId)) return d;
  for (const PciDevice& d : t.pci)
    for (const std::string& n : d.names)
      if (!c.name.empty() && n == c.name) return &d;
  return nullptr;
}

int numaPosition(const HwTopology& t, int osIndex) {
  for (size_t i = 0; i < t.numa.size(); i++)
    if (t.numa[i].osIndex == osIndex) return static_cast<int>(i);
  return -1;
}

std::string label(const NicCandidate& c, const PciDevice* d) {
  return c.name + (d ? " (" + d->busId + ")" : "");
}

}  // namespace

NicPick chooseClosestNic(const HwTopology& t, const RankLocality& where, const std::vector<NicCandidate>& nics) {
  NicPick pick;
  if (nics.size() <= 1) {
    pick.why = nics.empty() ? "no candidate" : "the only candidate";
    return pick;
  }
  const PciDevice* gpu = nullptr;
  if (!where.gpuBusId.empty())
    gpu = findDevice(t, NicCandidate{"", where.gpuBusId});
  const int node = numaPosition(t, where.numa);
  if (!gpu && node < 0) {
    pick.why = "the rank's GPU and NUMA node are unknown to the topology: kept the first candidate";
    return pick;
  }
  // Distance of each candidate: PCI hops from the GPU, or NUMA distance from the rank's node.
  std::vector<long> dist(nics.size(), kUnknown);
  std::vector<std::string> text(nics.size());
  for (size_t i = 0; i < nics.size(); i++) {
    const PciDevice* d = findDevice(t, nics[i]);
    if (!d) {
      text[i] = label(nics[i], d) + " not in the topology";
      continue;
    }
    if (gpu) {
      dist[i] = pciHops(*gpu, *d);
      text[i] = label(nics[i], d) + " " + std::to_string(dist[i]) + " PCI hops";
      continue;
    }
    const int nicNode = numaPosition(t, d->numa);
    if (nicNode < 0) {
      text[i] = label(nics[i], d) + " on no known NUMA node";
    } else if (nicNode == node) {
      dist[i] = 0;
      text[i] = label(nics[i], d) + " on NUMA node " + std::to_string(d->numa);
    } else {
      const bool known = !t.numaDistances.empty();
      dist[i] = known ? static_cast<long>(t.numaDistances[node][nicNode]) : 1000;
      text[i] = label(nics[i], d) + " on NUMA node " + std::to_string(d->numa) +
                (known ? " (distance " + std::to_string(dist[i]) + ")" : "");
    }
  }
  pick.index = static_cast<int>(std::min_element(dist.begin(), dist.end()) - dist.begin());
  const std::string anchor = gpu ? "GPU " + gpu->busId : "the rank's NUMA node " + std::to_string(where.numa);
  if (dist[pick.index] == kUnknown) {
    pick.why = "no candidate is in the topology: kept the first (" + text[0] + ")";
    return pick;
  }
  pick.why = "closest to " + anchor + ": " + text[pick.index];
  std::string others;
  for (size_t i = 0; i < nics.size(); i++)
    if (static_cast<int>(i) != pick.index) others += (others.empty() ? "" : ", ") + text[i];
  pick.why += "; others: " + others;
  return pick;
}

std::string busIdOfPciPath(const std::string& path) {
  std::string best;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(start, slash - start);
    if (looksLikeBusId(part)) best = lower(part);
    start = slash + 1;
  }
  return best;
}

std::string busIdOfInterface(const std::string& ifname) {
  if (ifname.empty() || ifname.find('/') != std::string::npos) return "";
  std::unique_ptr<char, decltype(&free)> real(realpath(("/sys/class/net/" + ifname + "/device").c_str(), nullptr),
                                              &free);
  return real ? busIdOfPciPath(real.get()) : "";
}

}  // namespace accl::topo
