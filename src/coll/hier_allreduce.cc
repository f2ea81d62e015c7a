// Hierarchical all-reduce (NCCL_ALGO=HierRing): on H hosts of L ranks each, (1) a ring
// reduce-scatter among each host's ranks leaves rank i of the host its host-reduced slice,
// (2) the i-th ranks of all hosts all-reduce that slice in a ring of their own, so every rank
// (hence every NIC) carries 2(H-1)/H of one L-th of the buffer across hosts, and (3) a ring
// all-gather among each host's ranks fills in the other slices. Inter-host steps: 2(H-1)
// instead of the whole ring's 2(N-1); bytes on each host's links: 2(H-1)/H x S instead of
// 2(N-1)/N x S. Each slice is reduced by one chain of ranks, so all ranks end bit-identical.
#include "coll/algorithms.h"

namespace accl {

std::vector<std::unique_ptr<StepSource>> makeHierarchicalAllReduce(const CollArgs& a, const topo::RankLayout& l) {
  std::vector<std::unique_ptr<StepSource>> phases;
  const int h = l.hostSlot[a.rank], i = l.slot[a.rank];
  const int ranksPerHost = static_cast<int>(l.hostRanks[h].size());
  const int hosts = static_cast<int>(l.hostRanks.size());
  CollArgs local = a;
  local.nranks = ranksPerHost;
  local.ringRanks = l.hostRanks[h].data();
  local.ringPos = l.slot.data();
  // The slice rank i of each host holds after the reduce-scatter (makeRingAllReducePart).
  const Slices slices{a.count, ranksPerHost};
  const int mine = mod(i + 1, ranksPerHost);
  const size_t off = slices.start(mine) * dev::typeSize(a.type);
  CollArgs across = a;
  across.nranks = hosts;
  across.ringRanks = l.peers[i].data();
  across.ringPos = l.hostSlot.data();
  across.count = slices.len(mine);
  across.src = a.dst + off;
  across.dst = a.dst + off;
  if (ranksPerHost > 1) phases.push_back(makeRingAllReducePart(local, RingPart::ReduceScatter));
  else across.src = a.src + off;
  if (hosts > 1 && across.count > 0) phases.push_back(makeRingAllReduce(across));
  if (ranksPerHost > 1) phases.push_back(makeRingAllReducePart(local, RingPart::AllGather));
  return phases;
}

}  // namespace accl
