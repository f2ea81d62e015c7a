// coll_plan.h: one rank's steps of a collective over connections (Ring, Tree, HierRing), as
// phases a lane runs one after another. The planner adds them to a lane; accl-sim runs the same
// plans through a link model (sched/plan_sim.h), so what it predicts is what the library runs.
// (ShmDirect, AllPairs and the deterministic rank-order plans are the planner's own.)
#pragma once
#include <memory>
#include <vector>
#include "coll/algorithms.h"
#include "sched/op.h"
#include "sched/tuner.h"
#include "topo/rank_layout.h"

namespace accl {

// Whether HierRing runs as itself for `kind` on this layout: all-reduce, all-gather and
// reduce-scatter on several hosts with the same number (> 1) of ranks on each.
bool hierRingRuns(OpKind kind, const topo::RankLayout& layout);
// Scratch bytes the plan needs (0: none): HierRing's reduce-scatter keeps the host-reduced
// blocks of its slice (one per host) between its two phases.
size_t planScratchBytes(OpKind kind, Algo algo, const CollArgs& a, const topo::RankLayout& layout);
// The phases of rank a.rank's plan. `treePieceBytes`: the largest message recursive doubling
// sends at once (half a channel: both partners send before they receive). `scratch`: at least
// planScratchBytes. `tree`: the all-reduce Tree's shape (tuner.h). Algorithms a kind does not
// have fall back as the planner always did (all-gather and reduce-scatter: Tree is the ring;
// HierRing where it cannot run: the ring).
std::vector<std::unique_ptr<StepSource>> planOverConnections(OpKind kind, Algo algo, const CollArgs& a,
                                                             const topo::RankLayout& layout, size_t treePieceBytes,
                                                             char* scratch, TreeShape tree = TreeShape::Doubling);

}  // namespace accl
