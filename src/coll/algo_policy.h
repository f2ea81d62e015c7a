// algo_policy.h: the algorithms NCCL_ALGO allows, per collective function.
#pragma once
#include <cstdint>
#include <string>
#include "nccl.h"

namespace accl {

// AllPairs (ours): every rank sends its whole input to every peer over its connections and
// folds all inputs in rank order (one hop; coll/rank_order_reduce.cc, the gathered shape).
// HierRing (ours): the hierarchical all-reduce, all-gather and reduce-scatter across hosts
// (coll/hier_allreduce.cc, hier_allgather.cc, hier_reduce_scatter.cc).
enum AlgoBit : uint8_t { kAlgoRing = 1, kAlgoTree = 2, kAlgoShmDirect = 4, kAlgoAllPairs = 8, kAlgoHierRing = 16 };
constexpr uint8_t kAlgoAll = kAlgoRing | kAlgoTree | kAlgoShmDirect | kAlgoAllPairs | kAlgoHierRing;

// The algorithms function f (index below) has besides Ring and Tree: ShmDirect for AllGather
// and AllReduce, AllPairs for AllReduce, HierRing for AllReduce, AllGather and ReduceScatter.
uint8_t extraAlgos(int f);

struct AlgoPolicy {
  // Allowed algorithms per function: Broadcast, Reduce, AllGather, ReduceScatter, AllReduce.
  uint8_t allowed[5] = {kAlgoRing | kAlgoTree, kAlgoRing | kAlgoTree,
                        kAlgoRing | kAlgoTree | kAlgoShmDirect | kAlgoHierRing, kAlgoRing | kAlgoTree | kAlgoHierRing,
                        kAlgoAll};
};

// Parses an NCCL_ALGO value ("" = all allowed). Errors are ncclInvalidUsage with a WARN.
ncclResult_t parseAlgoPolicy(const std::string& text, AlgoPolicy* out);

}  // namespace accl
