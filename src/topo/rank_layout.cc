// rank_layout.cc: grouping ranks by pod and host, and the ring order that follows the groups.
#include "topo/rank_layout.h"
#include <algorithm>
#include <cstddef>
#include <numeric>
#include <unordered_map>

namespace accl::topo {
namespace {

// Index of each key in order of first appearance (rank order).
std::vector<int> firstAppearanceIndex(const std::vector<uint64_t>& keys, int* count) {
  std::unordered_map<uint64_t, int> index;
  std::vector<int> out(keys.size());
  for (size_t r = 0; r < keys.size(); r++) out[r] = index.emplace(keys[r], static_cast<int>(index.size())).first->second;
  *count = static_cast<int>(index.size());
  return out;
}

}  // namespace

RankLayout layoutRanks(const std::vector<uint64_t>& hostKeys, const std::vector<uint64_t>& podKeys) {
  RankLayout l;
  const int n = static_cast<int>(hostKeys.size());
  l.hostOf = firstAppearanceIndex(hostKeys, &l.nhosts);
  if (podKeys.size() == hostKeys.size()) {
    l.podOf = firstAppearanceIndex(podKeys, &l.npods);
  } else {
    l.podOf.assign(n, 0);
    l.npods = n > 0 ? 1 : 0;
  }
  // A host's pod is that of its lowest rank (a host belongs to one pod).
  std::vector<int> podOfHost(l.nhosts, -1);
  for (int r = 0; r < n; r++)
    if (podOfHost[l.hostOf[r]] < 0) podOfHost[l.hostOf[r]] = l.podOf[r];
  l.ring.resize(n);
  std::iota(l.ring.begin(), l.ring.end(), 0);
  // Stable: ranks keep ascending order inside a host, hosts their first-rank order inside a pod.
  std::stable_sort(l.ring.begin(), l.ring.end(), [&](int a, int b) {
    const int ha = l.hostOf[a], hb = l.hostOf[b];
    if (podOfHost[ha] != podOfHost[hb]) return podOfHost[ha] < podOfHost[hb];
    return ha < hb;
  });
  l.ringPos.resize(n);
  for (int p = 0; p < n; p++) {
    l.ringPos[l.ring[p]] = p;
    l.inRankOrder = l.inRankOrder && l.ring[p] == p;
  }
  l.slot.resize(n);
  l.hostSlot.resize(n);
  for (int p = 0; p < n; p++) {
    const int r = l.ring[p];
    if (p == 0 || l.hostOf[r] != l.hostOf[l.ring[p - 1]]) l.hostRanks.emplace_back();
    l.slot[r] = static_cast<int>(l.hostRanks.back().size());
    l.hostSlot[r] = static_cast<int>(l.hostRanks.size()) - 1;
    l.hostRanks.back().push_back(r);
  }
  l.uniform = !l.hostRanks.empty();
  for (const auto& h : l.hostRanks) l.uniform = l.uniform && h.size() == l.hostRanks[0].size();
  if (l.uniform) {
    l.peers.assign(l.hostRanks[0].size(), {});
    for (const auto& h : l.hostRanks)
      for (size_t i = 0; i < h.size(); i++) l.peers[i].push_back(h[i]);
  }
  return l;
}

int RankLayout::hostCrossings() const {
  const size_t n = ring.size();
  int crossings = 0;
  for (size_t p = 0; p < n; p++) crossings += hostOf[ring[p]] != hostOf[ring[(p + 1) % n]];
  return crossings;
}

std::string RankLayout::describe(size_t maxRanks) const {
  std::string s;
  for (size_t p = 0; p < ring.size() && p < maxRanks; p++) {
    if (p > 0) s += hostOf[ring[p]] != hostOf[ring[p - 1]] ? " | " : " ";
    s += std::to_string(ring[p]);
  }
  if (ring.size() > maxRanks) s += " ...";
  return s;
}

}  // namespace accl::topo
