#include "sched/staged_launch.h"
#include <algorithm>
#include <cstring>
#include "base/check.h"
#include "base/log.h"
#include "comm/staged_path.h"

namespace accl {
namespace {

using Kind = StagedOp::Kind;

Kind stagedKind(OpKind k) {
  switch (k) {
    case OpKind::AllReduce: return Kind::AllReduce;
    case OpKind::Broadcast: return Kind::Broadcast;
    case OpKind::Reduce: return Kind::Reduce;
    case OpKind::AllGather: return Kind::AllGather;
    case OpKind::ReduceScatter: return Kind::ReduceScatter;
    case OpKind::AlltoAll: return Kind::AlltoAll;
    case OpKind::Gather: return Kind::Gather;
    case OpKind::Scatter: return Kind::Scatter;
    case OpKind::Send: return Kind::Send;
    case OpKind::Recv: return Kind::Recv;
  }
  return Kind::AllReduce;
}

ncclRedOp_t hostRedOp(const OpDesc& op) {
  if (op.avg) return ncclAvg;
  switch (op.red) {
    case dev::RedKind::Sum: return ncclSum;
    case dev::RedKind::Prod: return ncclProd;
    case dev::RedKind::Max: return ncclMax;
    case dev::RedKind::Min: return ncclMin;
  }
  return ncclSum;
}

// Input and output pieces of one op of `kind` (in user memory: one per rank where the buffer
// holds every rank's share), the same on every rank so that every rank cuts rounds alike.
void piecesOf(Kind kind, int nranks, int* in, int* out) {
  *in = *out = 1;
  if (kind == Kind::AllGather || kind == Kind::Gather) *out = nranks;
  if (kind == Kind::ReduceScatter || kind == Kind::Scatter) *in = nranks;
  if (kind == Kind::AlltoAll) *in = *out = nranks;
}

kern::StagedSegment segment(const void* p, uint64_t bytes, size_t roundBytes, int blocks, bool toStage) {
  kern::StagedSegment s{};
  s.dev = static_cast<char*>(const_cast<void*>(p));
  s.bytes = bytes;
  s.roundBytes = static_cast<uint32_t>(roundBytes);
  s.blocks = static_cast<uint16_t>(blocks);
  s.toStage = toStage ? 1 : 0;
  return s;
}

uint32_t roundsOf(const StagedCall& call) {
  uint64_t rounds = 0;
  for (const kern::StagedSegment& s : call.segs)
    if (s.roundBytes) rounds = std::max<uint64_t>(rounds, (s.bytes + s.roundBytes - 1) / s.roundBytes);
  return static_cast<uint32_t>(rounds);
}

// One collective of rank `rank` as a call of its own.
StagedCall collectiveCall(const OpDesc& op, int rank, int nranks, const StagedPath& sp, dev::Backend& backend) {
  StagedCall call;
  StagedOp s;
  s.kind = stagedKind(op.kind);
  s.type = op.type;
  s.op = hostRedOp(op);
  s.preMul = op.preMul;
  s.deviceScalar = op.preMul && op.deviceScalar != nullptr;
  std::memcpy(s.scalar, op.scalar, sizeof(s.scalar));
  s.root = op.root;
  int in = 0, out = 0;
  piecesOf(s.kind, nranks, &in, &out);
  const size_t es = dev::typeSize(op.type);
  const size_t rb = sp.roundBytesFor(static_cast<size_t>(in + out), es);
  const uint64_t bytes = op.count * es;
  const bool isRoot = op.root == rank;
  // Who has which buffer: a broadcast's or scatter's input only at the root, a reduce's or
  // gather's output likewise.
  const bool hasIn = !((s.kind == Kind::Broadcast || s.kind == Kind::Scatter) && !isRoot);
  const bool hasOut = !((s.kind == Kind::Reduce || s.kind == Kind::Gather) && !isRoot);
  if (hasIn) {
    s.inSeg = static_cast<int>(call.segs.size());
    call.segs.push_back(segment(backend.kernelAddress(op.sendbuff), bytes, rb, in, true));
  }
  if (hasOut) {
    s.outSeg = static_cast<int>(call.segs.size());
    call.segs.push_back(segment(backend.kernelAddress(op.recvbuff), bytes, rb, out, false));
  }
  call.ops.push_back(s);
  call.rounds = roundsOf(call);
  return call;
}

bool overlaps(const char* a, size_t an, const char* b, size_t bn) { return a < b + bn && b < a + an; }

// A group's sends and receives as one call: each round carries the next piece of every one of
// them (of p2pRoundBytes, so both sides of a pair cut alike).
ncclResult_t pointToPointCall(const std::vector<OpDesc*>& p2p, int rank, const StagedPath& sp, dev::Backend& backend,
                              StagedCall* call) {
  if (static_cast<int>(p2p.size()) > sp.maxP2pOps()) {
    WARN("rank %d: a group has %zu sends and receives on a communicator of more than %d ranks, whose staged kernel "
         "carries at most %d of them per group: split the group (docs/gpu.md, \"More than 16 ranks\")",
         rank, p2p.size(), kern::kMailboxRanks, sp.maxP2pOps());
    return ncclInvalidUsage;
  }
  const size_t rb = sp.p2pRoundBytes();
  for (const OpDesc* op : p2p) {
    StagedOp s;
    s.kind = stagedKind(op->kind);
    s.type = op->type;
    s.root = op->peer;
    const uint64_t bytes = op->count * dev::typeSize(op->type);
    const bool send = op->kind == OpKind::Send;
    (send ? s.inSeg : s.outSeg) = static_cast<int>(call->segs.size());
    call->segs.push_back(
        segment(backend.kernelAddress(send ? op->sendbuff : op->recvbuff), bytes, rb, 1, send));
    call->ops.push_back(s);
  }
  call->rounds = roundsOf(*call);
  // A receive that lands on a send's later rounds would change what that send sends.
  if (call->rounds > 1)
    for (const OpDesc* a : p2p)
      for (const OpDesc* b : p2p)
        if (a->kind == OpKind::Send && b->kind == OpKind::Recv &&
            overlaps(static_cast<const char*>(a->sendbuff), a->count * dev::typeSize(a->type),
                     static_cast<const char*>(b->recvbuff), b->count * dev::typeSize(b->type))) {
          WARN("rank %d: in one group, %s writes memory that %s reads, and both are larger than %zu bytes: on a "
               "communicator of more than %d ranks (staged kernels) give the receive its own buffer",
               rank, b->describe().c_str(), a->describe().c_str(), rb, kern::kMailboxRanks);
          return ncclInvalidUsage;
        }
  return ncclSuccess;
}

ncclResult_t launch(StagedPath& sp, StagedCall call, dev::Backend& backend, const dev::StreamRef& s,
                    const void* scalarPtr, size_t scalarBytes) {
  if (call.rounds == 0) return ncclSuccess;  // nothing to move (zero counts)
  kern::StagedArgs a;
  sp.addCall(std::move(call), &a);
  a.scalarPtr = scalarPtr;
  a.scalarBytes = static_cast<uint32_t>(scalarBytes);
  return backend.launchStaged(s, a);
}

}  // namespace

ncclResult_t launchStagedOps(std::vector<std::unique_ptr<OpDesc>> ops) {
  Comm& c = *ops.front()->comm;
  for (const auto& op : ops)
    if (op->comm.get() != &c) {
      WARN("rank %d and rank %d of a communicator of %d ranks were queued on one stream in one group: with more than "
           "%d ranks each rank needs its own stream (docs/gpu.md, \"More than 16 ranks\")",
           c.rank, op->comm->rank, c.nranks, kern::kMailboxRanks);
      return ncclInvalidUsage;
    }
  StagedPath& sp = *c.stagedPath;
  NCCLCHECK(sp.checkKernels(c));
  dev::Backend& backend = *c.backend;
  const dev::StreamRef first = ops.front()->stream;
  const std::vector<dev::StreamRef> others = otherStreams(ops);
  for (const dev::StreamRef& o : others) backend.orderAfter(o, {first});
  const bool capturing = backend.streamCapturing(first);
  sp.orderAfterPrevious(backend, first, capturing);
  std::vector<OpDesc*> p2p;
  for (auto& op : ops) {
    if (op->isP2p()) {
      p2p.push_back(op.get());
      continue;
    }
    StagedCall call = collectiveCall(*op, c.rank, c.nranks, sp, backend);
    call.captured = capturing;
    const bool devScalar = op->preMul && op->deviceScalar;
    NCCLCHECK(launch(sp, std::move(call), backend, first, devScalar ? backend.kernelAddress(op->deviceScalar) : nullptr,
                     devScalar ? dev::typeSize(op->type) : 0));
  }
  if (!p2p.empty()) {
    StagedCall call;
    NCCLCHECK(pointToPointCall(p2p, c.rank, sp, backend, &call));
    call.captured = capturing;
    NCCLCHECK(launch(sp, std::move(call), backend, first, nullptr, 0));
  }
  sp.markLaunched(backend, first, capturing);
  if (!others.empty()) backend.orderAfter(first, others);
  return ncclSuccess;
}

}  // namespace accl
