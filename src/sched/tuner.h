// tuner.h: which algorithm runs an op. NCCL_ALGO is parsed with NCCL's grammar; its "Ring"
// maps to our ring/chain algorithms and "Tree" to our latency algorithms (recursive
// doubling, flat trees). Other NCCL algorithm names are accepted but not implemented here.
#pragma once
#include <cstdint>
#include <string>
#include "nccl.h"
#include "coll/algo_policy.h"
#include "sched/op.h"

namespace accl {

enum class Algo { Ring, Tree };
// Picks the algorithm for an op of `bytes` per rank on a communicator of n ranks.
Algo chooseAlgo(const AlgoPolicy& policy, OpKind kind, size_t bytes, int nranks);
const char* algoName(Algo a);

}  // namespace accl
