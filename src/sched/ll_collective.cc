#include "sched/ll_collective.h"
#include <algorithm>
#include <atomic>
#include <cstddef>
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "comm/comm.h"
#include "comm/kernel_path.h"
#include "sched/direct_collective.h"

namespace accl {
namespace {

// NCCL_PROTO's function index (coll/proto_policy.h) of a collective kind.
int protoFunction(OpKind k) {
  switch (k) {
    case OpKind::Broadcast: return 0;
    case OpKind::Reduce: return 1;
    case OpKind::AllGather: return 2;
    case OpKind::ReduceScatter: return 3;
    default: return 4;
  }
}

// Bytes each rank sends to a peer: one input, or one segment of a reduce-scatter's input.
size_t pairBytes(const OpDesc& op) { return op.count * dev::typeSize(op.type); }

}  // namespace

bool llEligible(const OpDesc& op, const KernelPath& kp) {
  if (!directKindOf(op.kind) || op.comm->nranks < 2 || op.comm->nranks > kern::kMailboxRanks) return false;
  if (!op.comm->backend->hasLlKernels()) return false;
  const int f = protoFunction(op.kind);
  if (!op.comm->protoPolicy.allows(f, kProtoLL)) return false;
  if (callBytes(op) > kern::kLlMaxBytes) {
    // NCCL_PROTO without Simple for this function: LL cannot carry it here; said once.
    static std::atomic<bool> told{false};
    if (!op.comm->protoPolicy.allows(f, kProtoSimple) && !told.exchange(true))
      INFO(kSubsysTuning, "NCCL_PROTO allows only LL for %s, but ACCL's LL carries at most %zu bytes a call: larger "
           "calls use Simple",
           opKindName(op.kind), kern::kLlMaxBytes);
    return false;
  }
  return kp.allMailboxesReachable();
}

unsigned llThreads(size_t bytes) {
  if (const long long forced = param::nthreads(); forced >= 64 && forced <= 512 && forced % 64 == 0)
    return static_cast<unsigned>(forced);
  const size_t lines = (bytes + 7) / 8;
  return static_cast<unsigned>(std::clamp<size_t>((lines + 63) / 64 * 64, 64, 512));
}

ncclResult_t launchLlOps(const std::vector<OpDesc*>& ops, const dev::StreamRef& stream, bool count) {
  const OpDesc& lead = *ops.front();
  Comm& c0 = *lead.comm;
  kern::DirectArgs a;
  NCCLCHECK(buildDirectArgs(ops, &a));
  const unsigned threads = llThreads(pairBytes(lead));
  INFO(kSubsysTuning, "%s: %zu bytes on %d ranks that reach each other's mailboxes -> LL kernel, 1 block of %u "
       "threads per rank",
       opKindName(lead.kind), callBytes(lead), c0.nranks, threads);
  if (count)
    for (const OpDesc* op : ops) op->comm->kernelPath->countLaunch(&a.done, false);
  ACCL_TRACE(kSubsysColl, "%s: LL path, %d rank(s) here", lead.describe().c_str(), a.entries);
  return c0.backend->launchLl(stream, lead.type, static_cast<dev::RedKind>(a.red), a, threads);
}

}  // namespace accl
