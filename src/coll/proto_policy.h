// proto_policy.h: the protocols NCCL_PROTO allows, per collective function. ACCL's device path
// has two: LL (kernels/ll_kernel.h: data and flag in one 16-byte line, calls up to 64 KiB) and
// Simple (the direct and mailbox kernels). LL128 is accepted as NCCL's name; a function left with
// LL128 alone gets Simple (an INFO says so). The host path has one protocol and ignores the
// choice (a bad value still fails init).
#pragma once
#include <cstdint>
#include <string>
#include "nccl.h"

namespace accl {

enum ProtoBit : uint8_t { kProtoLL = 1, kProtoLL128 = 2, kProtoSimple = 4 };
constexpr uint8_t kProtoAll = kProtoLL | kProtoLL128 | kProtoSimple;

struct ProtoPolicy {
  // Allowed protocols per function: Broadcast, Reduce, AllGather, ReduceScatter, AllReduce.
  uint8_t allowed[5] = {kProtoAll, kProtoAll, kProtoAll, kProtoAll, kProtoAll};
  bool allows(int function, ProtoBit p) const { return (allowed[function] & p) != 0; }
};

// Parses an NCCL_PROTO value ("" = all allowed) with NCCL_ALGO's grammar: "LL,Simple",
// "^LL", "Simple;allreduce:LL". Errors are ncclInvalidUsage with a WARN: an unknown protocol or
// function, a later entry without a function, or a function left with no protocol at all.
ncclResult_t parseProtoPolicy(const std::string& text, ProtoPolicy* out);

}  // namespace accl
