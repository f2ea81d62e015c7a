#include "sched/direct_collective.h"
#include <algorithm>
#include <cstddef>
#include <cstring>
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "comm/kernel_path.h"

namespace accl {
namespace {

// Below this an all-reduce stays on the mailbox path (one exchange of whole inputs, sched/
// device_collective.cc): the direct path's handshake costs more than it saves there.
constexpr size_t kDirectMinBytes = 512 << 10;
// Blocks of one process's ranks resident at once: the emulated grid runs 64 (kernels/emulated/
// grid.h), and every block of every rank must run side by side.
constexpr int kDirectMaxBlocks = 64;
// One block per this many bytes, up to the cap: >= 16 blocks per rank from 1 MiB.
constexpr size_t kDirectBytesPerBlock = 64 << 10;

}  // namespace

int directBlocksPerRank(size_t bytes, int nranks, int resident) {
  const int total = resident > 0 ? std::min(resident, kDirectMaxBlocks) : kDirectMaxBlocks;
  const int cap = std::max(1, total / std::max(1, nranks));
  const size_t want = std::max<size_t>(1, bytes / kDirectBytesPerBlock);
  int blocks = static_cast<int>(std::min<size_t>(want, static_cast<size_t>(cap)));
  // NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS clamp it as they clamp the mailbox kernel's grid
  // (never past what can be resident at once: every block of every rank must run together).
  if (const long long lo = param::minNchannels(); lo > 0) blocks = std::max(blocks, static_cast<int>(std::min<long long>(lo, cap)));
  if (const long long hi = param::maxNchannels(); hi > 0) blocks = std::min(blocks, static_cast<int>(hi));
  INFO(kSubsysTuning, "AllReduce: %zu bytes on %d ranks of one process -> direct kernel, %d blocks per rank of %u threads",
       bytes, nranks, blocks, kern::kDirectThreads);
  return blocks;
}

bool directEligible(const OpDesc& op, const KernelPath& kp) {
  if (param::p2pDirectDisable() != 0) return false;
  if (op.kind != OpKind::AllReduce || op.comm->nranks < 2 || op.comm->nranks > kern::kMailboxRanks) return false;
  return op.count * dev::typeSize(op.type) >= kDirectMinBytes && kp.allRanksInProcess();
}

ncclResult_t launchDirectOps(const std::vector<OpDesc*>& ops, const dev::StreamRef& stream, bool count) {
  const OpDesc& lead = *ops.front();
  Comm& c0 = *lead.comm;
  dev::Backend& backend = *c0.backend;
  kern::CollKernelArgs common;  // the mailboxes, abort word, report and timeout, as the mailbox path has them
  c0.kernelPath->fillCommon(&common);
  kern::DirectArgs a;
  std::memset(&a, 0, sizeof(a));
  a.nranks = c0.nranks;
  a.entries = static_cast<int32_t>(ops.size());
  a.blocksPerRank =
      directBlocksPerRank(lead.count * dev::typeSize(lead.type), c0.nranks, backend.residentCollectiveBlocks());
  a.divisor = lead.avg ? static_cast<uint32_t>(c0.nranks) : 1;
  a.count = lead.count;
  a.kind = static_cast<uint8_t>(kern::DirectKind::AllReduce);
  a.type = static_cast<uint8_t>(lead.type);
  a.red = static_cast<uint8_t>(lead.red);
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
    // Every rank of the launch is in the same call shape (a mismatch is the kernels' to report).
    if (op.comm->nranks != c0.nranks) {
      WARN("%s: ranks of communicators of different sizes in one direct launch", op.describe().c_str());
      return ncclInvalidUsage;
    }
  }
  if (count)
    for (const OpDesc* op : ops) op->comm->kernelPath->countLaunch(&a.done, false);
  ACCL_TRACE(kSubsysColl, "%s: direct path, %d rank(s) here, %d blocks each", lead.describe().c_str(), a.entries,
        a.blocksPerRank);
  return backend.launchDirect(stream, lead.type, lead.red, a);
}

}  // namespace accl
