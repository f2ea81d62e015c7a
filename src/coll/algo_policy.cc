// algo_policy.cc: parsing NCCL_ALGO into the set of algorithms each collective may use.
#include "coll/algo_policy.h"
#include "base/log.h"
#include "coll/policy_grammar.h"

namespace accl {
namespace {

// The names NCCL has; those with bit 0 are accepted and implemented nowhere here.
constexpr PolicyName kAlgoNames[] = {{"Ring", kAlgoRing},          {"Tree", kAlgoTree},
                                     {"ShmDirect", kAlgoShmDirect}, {"AllPairs", kAlgoAllPairs},
                                     {"HierRing", kAlgoHierRing},   {"CollNetDirect", 0},
                                     {"CollNetChain", 0},           {"NVLS", 0},
                                     {"NVLSTree", 0},               {"PAT", 0}};
constexpr PolicyGrammar kAlgoGrammar{"NCCL_ALGO", "algorithm", kAlgoNames, sizeof(kAlgoNames) / sizeof(kAlgoNames[0]),
                                     kAlgoAll};

}  // namespace

uint8_t extraAlgos(int f) {
  if (f == 2) return kAlgoShmDirect | kAlgoHierRing;
  if (f == 3) return kAlgoHierRing;
  if (f == 4) return kAlgoShmDirect | kAlgoAllPairs | kAlgoHierRing;
  return 0;
}

ncclResult_t parseAlgoPolicy(const std::string& text, AlgoPolicy* out) {
  PolicyEntries e;
  if (parsePolicyEntries(text, kAlgoGrammar, &e) != ncclSuccess) return ncclInvalidUsage;
  AlgoPolicy p;
  if (e.hasEveryFunction) {
    // A list for every function: a function that has none of the listed algorithms keeps Ring
    // and Tree when the list names only our own ones (ShmDirect, AllPairs, HierRing), so
    // NCCL_ALGO=ShmDirect, AllPairs or HierRing forces it where it exists.
    const uint8_t bits = e.everyFunction;
    const bool onlyOurs = bits != 0 && (bits & (kAlgoRing | kAlgoTree)) == 0;
    for (int f = 0; f < kPolicyFunctions; f++)
      p.allowed[f] = onlyOurs && (bits & extraAlgos(f)) == 0 ? (kAlgoRing | kAlgoTree) : bits;
  }
  for (int f = 0; f < kPolicyFunctions; f++) {
    if (e.hasFunction[f]) p.allowed[f] = e.function[f];
    if (!e.hasEveryFunction && !e.hasFunction[f]) continue;  // the default, every algorithm it has
    p.allowed[f] &= kAlgoRing | kAlgoTree | extraAlgos(f);
    if (p.allowed[f] == 0) {
      WARN("NCCL_ALGO=\"%s\" leaves no algorithm ACCL implements for %s (ACCL has Ring and Tree for every "
           "function, ShmDirect for AllGather and AllReduce, AllPairs for AllReduce, HierRing for AllReduce, "
           "AllGather and ReduceScatter)",
           text.c_str(), policyFunctionName(f));
      return ncclInvalidUsage;
    }
  }
  *out = p;
  return ncclSuccess;
}

}  // namespace accl
