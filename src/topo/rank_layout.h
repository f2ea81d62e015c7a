// rank_layout.h: where every rank of a communicator lives (pod, host) and the ring order that
// follows it. Ranks are often placed round robin over hosts (mpirun --map-by node, many
// Kubernetes launchers); a ring in rank order then crosses a host boundary at every step and
// carries (ranks per host) times the bytes an ordered ring puts on each host's link. The
// order here visits each pod's hosts together and each host's ranks together, so every host
// (and every pod) has exactly one ring edge in and one out, whatever the placement.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace accl::topo {

struct RankLayout {
  int nhosts = 1;
  int npods = 1;
  std::vector<int> hostOf;   // by rank: host index, hosts numbered by their lowest rank
  std::vector<int> podOf;    // by rank: pod index, pods numbered by their lowest rank
  std::vector<int> ring;     // ring position -> rank
  std::vector<int> ringPos;  // rank -> ring position
  // Whether the ring is the identity (rank order already follows the hosts).
  bool inRankOrder = true;
  // The hierarchical algorithms' groups. hostRanks[h]: the ranks of the h-th host along the
  // ring, in ring order; slot[r]: r's index there; hostSlot[r]: h of r's host. When every host
  // has the same number of ranks (uniform), peers[i]: the i-th rank of every host, in host
  // order (the ranks that own the same slice of a hierarchical all-reduce).
  std::vector<std::vector<int>> hostRanks;
  std::vector<int> slot, hostSlot;
  bool uniform = false;
  std::vector<std::vector<int>> peers;
  int ranksPerHost() const { return uniform && !hostRanks.empty() ? static_cast<int>(hostRanks[0].size()) : 0; }
  // Ring edges (position p -> p+1, including the wrap) whose ends are on different hosts.
  int hostCrossings() const;
  // "0 4 1 5 | 2 6 ..." with '|' between hosts, at most `maxRanks` ranks (for INFO logs).
  std::string describe(size_t maxRanks = 64) const;
};

// hostKeys[r]: equal for ranks on one host; podKeys[r] (may be empty: one pod) equal for
// hosts in one pod. Pods in order of their lowest rank, hosts inside a pod likewise, ranks
// inside a host ascending (local rank order, which is how launchers bind GPUs and NICs).
RankLayout layoutRanks(const std::vector<uint64_t>& hostKeys, const std::vector<uint64_t>& podKeys = {});

}  // namespace accl::topo
