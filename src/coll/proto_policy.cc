// proto_policy.cc: parsing NCCL_PROTO into the protocols each collective may use.
#include "coll/proto_policy.h"
#include "base/log.h"
#include "coll/policy_grammar.h"

namespace accl {
namespace {

constexpr PolicyName kProtoNames[] = {{"LL", kProtoLL}, {"LL128", kProtoLL128}, {"Simple", kProtoSimple}};
constexpr PolicyGrammar kProtoGrammar{"NCCL_PROTO", "protocol", kProtoNames, sizeof(kProtoNames) / sizeof(kProtoNames[0]),
                                      kProtoAll};

}  // namespace

ncclResult_t parseProtoPolicy(const std::string& text, ProtoPolicy* out) {
  PolicyEntries e;
  if (parsePolicyEntries(text, kProtoGrammar, &e) != ncclSuccess) return ncclInvalidUsage;
  ProtoPolicy p;
  for (int f = 0; f < kPolicyFunctions; f++) {
    if (e.hasEveryFunction) p.allowed[f] = e.everyFunction;
    if (e.hasFunction[f]) p.allowed[f] = e.function[f];
    if ((p.allowed[f] & (kProtoLL | kProtoSimple)) != 0) continue;
    if (p.allowed[f] == 0) {
      WARN("NCCL_PROTO=\"%s\" leaves no protocol for %s", text.c_str(), policyFunctionName(f));
      return ncclInvalidUsage;
    }
    // LL128 alone (a common setting for NCCL on NVLink machines): ACCL's bulk protocol, Simple,
    // carries what LL128 would, rather than failing a job tuned for NCCL.
    p.allowed[f] |= kProtoSimple;
    INFO(kSubsysTuning, "NCCL_PROTO=\"%s\": %s allows only LL128, which ACCL does not have; Simple carries it",
         text.c_str(), policyFunctionName(f));
  }
  *out = p;
  return ncclSuccess;
}

}  // namespace accl
