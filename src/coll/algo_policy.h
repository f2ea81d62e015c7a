// algo_policy.h: the algorithms NCCL_ALGO allows, per collective function.
#pragma once
#include <cstdint>
#include <string>
#include "nccl.h"

namespace accl {

enum AlgoBit : uint8_t { kAlgoRing = 1, kAlgoTree = 2, kAlgoShmDirect = 4 };
constexpr uint8_t kAlgoAll = kAlgoRing | kAlgoTree | kAlgoShmDirect;

struct AlgoPolicy {
  // Allowed algorithms per function: Broadcast, Reduce, AllGather, ReduceScatter, AllReduce.
  // ShmDirect exists for AllGather and AllReduce only.
  uint8_t allowed[5] = {kAlgoRing | kAlgoTree, kAlgoRing | kAlgoTree, kAlgoAll, kAlgoRing | kAlgoTree, kAlgoAll};
};

// Parses an NCCL_ALGO value ("" = all allowed). Errors are ncclInvalidUsage with a WARN.
ncclResult_t parseAlgoPolicy(const std::string& text, AlgoPolicy* out);

}  // namespace accl
