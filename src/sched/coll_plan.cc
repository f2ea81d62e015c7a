#include "sched/coll_plan.h"
#include <algorithm>

namespace accl {

bool hierRingRuns(OpKind kind, const topo::RankLayout& layout) {
  const bool kindHas = kind == OpKind::AllReduce || kind == OpKind::AllGather || kind == OpKind::ReduceScatter;
  return kindHas && layout.uniform && layout.nhosts > 1 && layout.ranksPerHost() > 1;
}

size_t planScratchBytes(OpKind kind, Algo algo, const CollArgs& a, const topo::RankLayout& layout) {
  if (kind != OpKind::ReduceScatter || algo != Algo::HierRing || !hierRingRuns(kind, layout)) return 0;
  return a.count * dev::typeSize(a.type) * layout.nhosts;
}

std::vector<std::unique_ptr<StepSource>> planOverConnections(OpKind kind, Algo algo, const CollArgs& a,
                                                             const topo::RankLayout& layout, size_t treePieceBytes,
                                                             char* scratch, TreeShape tree) {
  std::vector<std::unique_ptr<StepSource>> phases;
  const bool hier = algo == Algo::HierRing && hierRingRuns(kind, layout);
  switch (kind) {
    case OpKind::AllReduce:
      if (hier) return makeHierarchicalAllReduce(a, layout);
      if (algo == Algo::Tree) {
        // Recursive doubling (or the binomial or flat tree) in pieces of at most half a channel.
        const size_t esize = dev::typeSize(a.type);
        const size_t pieceElems = std::max<size_t>(1, treePieceBytes / esize);
        for (size_t lo = 0; lo < a.count; lo += pieceElems) {
          CollArgs p = a;
          p.src = a.src + lo * esize;
          p.dst = a.dst + lo * esize;
          p.count = std::min(pieceElems, a.count - lo);
          phases.push_back(tree == TreeShape::Binomial ? makeBinomialTreeAllReduce(p)
                           : tree == TreeShape::Flat   ? makeDirectAllReduce(p)
                                                       : makeRecursiveDoublingAllReduce(p));
        }
        return phases;
      }
      phases.push_back(makeRingAllReduce(a));
      return phases;
    case OpKind::AllGather:
      if (hier) return makeHierarchicalAllGather(a, layout);
      phases.push_back(makeRingAllGather(a));
      return phases;
    case OpKind::ReduceScatter:
      if (hier) return makeHierarchicalReduceScatter(a, layout, scratch);
      phases.push_back(makeRingReduceScatter(a));
      return phases;
    case OpKind::Broadcast:
      phases.push_back(algo == Algo::Tree ? makeDirectBroadcast(a) : makeRingBroadcast(a));
      return phases;
    case OpKind::Reduce:
      phases.push_back(algo == Algo::Tree ? makeDirectReduce(a) : makeChainReduce(a));
      return phases;
    case OpKind::Gather: phases.push_back(makeDirectGather(a)); return phases;
    case OpKind::Scatter: phases.push_back(makeDirectScatter(a)); return phases;
    default: return phases;
  }
}

}  // namespace accl
