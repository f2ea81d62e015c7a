// policy_grammar.h: NCCL's grammar for NCCL_ALGO and NCCL_PROTO (spec/nccl-env.md §4), shared by
// coll/algo_policy and coll/proto_policy: entries separated by ';', the first may be a bare
// list that applies to every function, the others are "function:list"; a list is names
// separated by ',', all of them excluded with a leading '^'; names and functions in any case.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include "nccl.h"

namespace accl {

// Collective functions in NCCL's order, as both policies index them.
constexpr int kPolicyFunctions = 5;  // Broadcast, Reduce, AllGather, ReduceScatter, AllReduce
const char* policyFunctionName(int f);

struct PolicyName {
  const char* name;
  uint8_t bit;  // 0: a name NCCL has and ACCL accepts without implementing it
};

struct PolicyGrammar {
  const char* variable;  // for the WARN lines: "NCCL_ALGO"
  const char* what;      // "algorithm"
  const PolicyName* names;
  size_t nameCount;
  uint8_t all;  // what "^" excludes from
};

// What a value says, before a policy applies its own rules.
struct PolicyEntries {
  bool hasEveryFunction = false;
  uint8_t everyFunction = 0;  // the bare first entry's list
  bool hasFunction[kPolicyFunctions] = {};
  uint8_t function[kPolicyFunctions] = {};
};

// ncclInvalidUsage with a WARN for an unknown name or function and for a later entry without a
// function; `text` "" is no entry at all.
ncclResult_t parsePolicyEntries(const std::string& text, const PolicyGrammar& g, PolicyEntries* out);

}  // namespace accl
