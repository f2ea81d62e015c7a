#include "sched/direct_collective.h"
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "comm/kernel_path.h"

namespace accl {
namespace {

// Below this (the call's largest buffer) a collective stays on the mailbox path (one exchange of
// whole inputs, sched/device_collective.cc): the direct path's handshake costs more than it
// saves there.
constexpr size_t kDirectMinBytes = 512 << 10;
// Blocks of one process's ranks resident at once: the emulated grid runs 64 (kernels/emulated/
// grid.h), and every block of every rank must run side by side.
constexpr int kDirectMaxBlocks = 64;
// One block per this many bytes, up to the cap: >= 16 blocks per rank from 1 MiB.
constexpr size_t kDirectBytesPerBlock = 64 << 10;

// The same call shape on every rank a launch carries (one thread queued them in one group):
// the launch tells them one count, type, op and root.
bool sameShape(const OpDesc& x, const OpDesc& y) {
  return x.kind == y.kind && x.count == y.count && x.type == y.type && x.root == y.root && x.avg == y.avg &&
         x.preMul == y.preMul &&
         (!opReduces(x.kind) || x.red == y.red) && x.comm->nranks == y.comm->nranks;
}

}  // namespace

std::optional<kern::DirectKind> directKindOf(OpKind k) {
  switch (k) {
    case OpKind::AllReduce: return kern::DirectKind::AllReduce;
    case OpKind::AllGather: return kern::DirectKind::AllGather;
    case OpKind::ReduceScatter: return kern::DirectKind::ReduceScatter;
    case OpKind::Broadcast: return kern::DirectKind::Broadcast;
    case OpKind::Reduce: return kern::DirectKind::Reduce;
    default: return std::nullopt;
  }
}

size_t callBytes(const OpDesc& op) {
  const size_t bytes = op.count * dev::typeSize(op.type);
  const bool whole = op.kind == OpKind::AllGather || op.kind == OpKind::ReduceScatter;
  return whole ? bytes * static_cast<size_t>(op.comm->nranks) : bytes;
}

int directBlocksPerRank(OpKind kind, size_t bytes, int nranks, int resident) {
  const int total = resident > 0 ? std::min(resident, kDirectMaxBlocks) : kDirectMaxBlocks;
  const int cap = std::max(1, total / std::max(1, nranks));
  const size_t want = std::max<size_t>(1, bytes / kDirectBytesPerBlock);
  int blocks = static_cast<int>(std::min<size_t>(want, static_cast<size_t>(cap)));
  // NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS clamp it as they clamp the mailbox kernel's grid
  // (never past what can be resident at once: every block of every rank must run together).
  if (const long long lo = param::minNchannels(); lo > 0) blocks = std::max(blocks, static_cast<int>(std::min<long long>(lo, cap)));
  if (const long long hi = param::maxNchannels(); hi > 0) blocks = std::min(blocks, static_cast<int>(hi));
  INFO(kSubsysTuning, "%s: %zu bytes on %d ranks of one process -> direct kernel, %d blocks per rank of %u threads",
       opKindName(kind), bytes, nranks, blocks, kern::kDirectThreads);
  return blocks;
}

bool directEligible(const OpDesc& op, const KernelPath& kp) {
  if (param::p2pDirectDisable() != 0) return false;
  if (!directKindOf(op.kind) || op.comm->nranks < 2 || op.comm->nranks > kern::kMailboxRanks) return false;
  return callBytes(op) >= kDirectMinBytes && kp.allRanksInProcess();
}

ncclResult_t buildDirectArgs(const std::vector<OpDesc*>& ops, kern::DirectArgs* out) {
  const OpDesc& lead = *ops.front();
  Comm& c0 = *lead.comm;
  kern::CollKernelArgs common;  // the mailboxes, abort word, report and timeout, as the mailbox path has them
  c0.kernelPath->fillCommon(&common);
  kern::DirectArgs& a = *out;
  std::memset(&a, 0, sizeof(a));
  a.nranks = c0.nranks;
  a.entries = static_cast<int32_t>(ops.size());
  a.blocksPerRank = 1;
  a.divisor = lead.avg ? static_cast<uint32_t>(c0.nranks) : 1;
  a.count = lead.count;
  a.root = lead.root;
  a.kind = static_cast<uint8_t>(*directKindOf(lead.kind));
  a.type = static_cast<uint8_t>(lead.type);
  // The kinds that copy run the sum kernel of their type (their op argument means nothing).
  a.red = static_cast<uint8_t>(opReduces(lead.kind) ? lead.red : dev::RedKind::Sum);
  for (int r = 0; r < c0.nranks; r++) a.mailbox[r] = common.mailbox[r];
  a.abortFlag = common.abortFlag;
  a.timeoutNs = common.timeoutNs;
  a.report = common.report;
  for (size_t i = 0; i < ops.size(); i++) {
    const OpDesc& op = *ops[i];
    kern::DirectEntry& e = a.entry[i];
    e.rank = op.comm->rank;
    e.send = static_cast<const char*>(op.sendbuff);
    e.recv = static_cast<char*>(op.recvbuff);
    static_assert(sizeof(kern::KStamp) == sizeof(CallStamp));
    std::memcpy(&e.stamp, &op.stamp, sizeof(CallStamp));
    if (op.preMul) {
      e.scalarKind = op.deviceScalar ? kern::ScalarKind::Device : kern::ScalarKind::Immediate;
      e.scalarPtr = op.deviceScalar;
      std::memcpy(e.scalarBytes, op.scalar, sizeof(e.scalarBytes));
    }
    // Every rank of the launch is in the same call shape: the launch tells them one (a mismatch
    // between ranks queued by different threads is the kernels' to report).
    if (!sameShape(op, lead)) {
      WARN("mismatched calls: rank %d called %s and rank %d called %s, queued by one thread in one group",
           lead.comm->rank, lead.describe().c_str(), op.comm->rank, op.describe().c_str());
      return ncclInvalidUsage;
    }
  }
  return ncclSuccess;
}

ncclResult_t launchDirectOps(const std::vector<OpDesc*>& ops, const dev::StreamRef& stream, bool count) {
  const OpDesc& lead = *ops.front();
  Comm& c0 = *lead.comm;
  dev::Backend& backend = *c0.backend;
  kern::DirectArgs a;
  NCCLCHECK(buildDirectArgs(ops, &a));
  a.blocksPerRank = directBlocksPerRank(lead.kind, callBytes(lead), c0.nranks, backend.residentCollectiveBlocks());
  if (count)
    for (const OpDesc* op : ops) op->comm->kernelPath->countLaunch(&a.done, false);
  ACCL_TRACE(kSubsysColl, "%s: direct path, %d rank(s) here, %d blocks each", lead.describe().c_str(), a.entries,
        a.blocksPerRank);
  return backend.launchDirect(stream, lead.type, static_cast<dev::RedKind>(a.red), a);
}

}  // namespace accl
