#include "sched/planner.h"
#include <algorithm>
#include <cstring>
#include <map>
#include "coll/algorithms.h"
#include "base/check.h"
#include "base/param.h"
#include "sched/coll_plan.h"
#include "sched/mismatch_check.h"
#include "sched/tuner.h"
#include "sched/work.h"

namespace accl {
namespace {

size_t pieceBytes(const Comm& c) {
  size_t piece = c.pieceBytes;  // ACCL_CHUNK_SIZE, or chosen at init from the transports
  size_t cap = c.ringBytes / 4;  // keep two pieces in flight without filling a channel
  piece = std::min(piece, cap);
  return std::max<size_t>(piece, 64);
}

// Elements of input this rank contributes, and elements of output it receives.
size_t inputElems(const OpDesc& op, int n) {
  return op.kind == OpKind::ReduceScatter || op.kind == OpKind::Scatter || op.kind == OpKind::AlltoAll
             ? op.count * n
             : op.count;
}
size_t outputElems(const OpDesc& op, int n) {
  return op.kind == OpKind::AllGather || op.kind == OpKind::Gather || op.kind == OpKind::AlltoAll ? op.count * n
                                                                                                  : op.count;
}

// Deterministic mode: the tuner's choice picks the shape (Tree: whole buffers to the reducers,
// one hop; Ring: each rank reduces its slice), and both fold every element in rank order.
void addRankOrderAlgorithm(Lane& lane, const OpDesc& op, const CollArgs& a, Algo algo, bool stream) {
  switch (op.kind) {
    case OpKind::AllReduce:
      lane.add(algo == Algo::Tree ? makeRankOrderGatheredAllReduce(a) : makeRankOrderAllReduce(a), stream);
      break;
    case OpKind::Reduce:
      lane.add(algo == Algo::Tree ? makeRankOrderGatheredReduce(a) : makeRankOrderReduce(a), stream);
      break;
    case OpKind::ReduceScatter: lane.add(makeRankOrderReduceScatter(a), stream); break;
    default: break;
  }
}

ncclResult_t addAlgorithm(Lane& lane, CommWork& w, const OpDesc& op, const CollArgs& a, const Comm& c) {
  const size_t bytes = op.count * dev::typeSize(op.type);
  const bool stream = streamsOutput(op, c.nranks);
  // The ShmDirect board is read and written by the CPU: host buffers only.
  const bool hostBoard = c.backend->hostBuffers();
  TopoShape shape{c.layout.nhosts, c.layout.ranksPerHost()};
  shape.kernelRanks = c.kernelRanks;
  shape.kernelCores = c.kernelCores;
  std::string why;
  Algo algo = chooseAlgo(c.algoPolicy, op.kind, bytes, c.nranks, hostBoard ? c.board.capacity : 0,
                         hostBoard && c.board.peersReadable, &shape, &why);
  // ShmDirect and AllPairs fold in rank order already ((x0 op x1) op x2 ..., the same on every rank).
  const bool rankOrder = opReduces(op.kind) && c.deterministic.load(std::memory_order_relaxed) &&
                         algo != Algo::ShmDirect && algo != Algo::AllPairs;
  const bool readInPlace =
      algo == Algo::ShmDirect && useShmRead(op.kind, bytes, c.nranks, hostBoard && c.board.peersReadable);
  const bool shapedTree = op.kind == OpKind::AllReduce && algo == Algo::Tree && !rankOrder;
  const TreeShape tree = shapedTree ? chooseTreeShape(bytes, c.nranks, &shape) : TreeShape::Doubling;
  INFO(kSubsysTuning, "%s: %zu bytes on %d ranks -> %s%s%s%s%s%s", opKindName(op.kind), bytes, c.nranks,
       algoName(algo), shapedTree ? "/" : "", shapedTree ? treeShapeName(tree) : "",
       rankOrder                                                          ? " (rank order)"
       : readInPlace                                                      ? " (inputs read in place)"
       : algo == Algo::ShmDirect && useShmSlices(op.kind, bytes, c.nranks) ? " (in slices)"
                                                                          : "",
       why.empty() ? "" : ": ", why.c_str());
  if (rankOrder) {
    addRankOrderAlgorithm(lane, op, a, algo, stream);
    return ncclSuccess;
  }
  if (algo == Algo::ShmDirect) {
    if (op.kind == OpKind::AllReduce)
      lane.add(useShmSlices(op.kind, bytes, c.nranks) ? makeShmSlicedAllReduce(a) : makeShmDirectAllReduce(a));
    else
      lane.add(readInPlace ? makeShmReadAllGather(a) : makeShmDirectAllGather(a), readInPlace ? false : stream);
    return ncclSuccess;
  }
  if (algo == Algo::AllPairs) {
    // The deterministic mode's one-hop shape: inputs to every rank, folded in rank order.
    lane.add(makeRankOrderGatheredAllReduce(a), stream);
    return ncclSuccess;
  }
  // Ring, Tree and HierRing: the plans accl-sim runs too (sched/coll_plan.h).
  char* scratch = nullptr;
  if (const size_t need = planScratchBytes(op.kind, algo, a, c.layout)) {
    w.scratch.emplace_back();
    NCCLCHECK(c.backend->scratch(need, &w.scratch.back()));
    scratch = w.scratch.back().get();
  }
  // Recursive doubling's whole-buffer messages stay in cache: no streaming stores.
  const bool streamPlan = stream && !(op.kind == OpKind::AllReduce && algo == Algo::Tree);
  for (auto& phase : planOverConnections(op.kind, algo, a, c.layout, c.ringBytes / 2, scratch, tree))
    lane.add(std::move(phase), streamPlan);
  return ncclSuccess;
}

// One collective (not all-to-all) appended to `lane`: [pre-scale] algorithm [average].
ncclResult_t addCollective(Lane& lane, CommWork& w, OpDesc& op) {
  const Comm& c = *op.comm;
  const int n = c.nranks;
  const size_t esize = dev::typeSize(op.type);
  CollArgs a = collArgsOf(op, c);
  lane.stampNext(op.stamp.magic ? &op.stamp : nullptr);

  if (op.preMul && opReduces(op.kind)) {
    auto pre = std::make_unique<StepList>();
    size_t inBytes = inputElems(op, n) * esize;
    w.scratch.emplace_back();
    NCCLCHECK(c.backend->scratch(inBytes, &w.scratch.back()));
    Step s = copyStep(a, w.scratch.back().get(), a.src, inBytes);
    s.kind = Step::Kind::Scale;
    s.scalar = op.deviceScalar ? op.deviceScalar : op.scalar;
    pre->push(s);
    a.src = w.scratch.back().get();
    lane.add(std::move(pre));
  }

  if (n == 1) {
    auto only = std::make_unique<StepList>();
    only->push(copyStep(a, a.dst, a.src, outputElems(op, n) * esize));
    lane.add(std::move(only));
  } else {
    NCCLCHECK(addAlgorithm(lane, w, op, a, c));
  }

  bool hasOutput = op.kind != OpKind::Reduce || c.rank == op.root;
  if (op.avg && hasOutput) {
    auto post = std::make_unique<StepList>();
    Step s = copyStep(a, a.dst, a.dst, outputElems(op, n) * esize);
    s.kind = Step::Kind::Divide;
    s.divisor = n;
    post->push(s);
    lane.add(std::move(post));
  }
  return ncclSuccess;
}

// Send/receive lanes, one per peer and direction; sends to self pair with receives from self.
// With ACCL_CHECK_MISMATCH each send is preceded by a size header and each receive reads it
// (sched/mismatch_check.h).
ncclResult_t addPointToPoint(CommWork& w, std::vector<Lane>& lanes, const std::vector<OpDesc*>& p2p,
                             const std::vector<OpDesc*>& alltoall) {
  const bool checked = param::checkMismatch() == 2 && !p2p.empty();
  // [peer]: its steps in order, one list per call that stamps them (sched/call_stamp.h).
  using Lists = std::map<int, std::vector<std::pair<std::unique_ptr<StepList>, const CallStamp*>>>;
  Lists sends, recvs;
  std::map<int, std::vector<std::unique_ptr<StepSource>>> checkedRecvs;
  std::vector<OpDesc*> selfSends, selfRecvs;
  auto args = [](const OpDesc& op) {
    CollArgs a;
    a.type = op.type;
    return a;
  };
  auto list = [](Lists& m, int peer, const OpDesc* op = nullptr) -> StepList& {
    const CallStamp* stamp = op && op->stamp.magic ? &op->stamp : nullptr;
    auto& l = m[peer];
    if (l.empty() || l.back().second != stamp) l.emplace_back(std::make_unique<StepList>(), stamp);
    return *l.back().first;
  };
  for (OpDesc* op : alltoall) {
    const Comm& c = *op->comm;
    const size_t bytes = op->count * dev::typeSize(op->type);
    const char* src = static_cast<const char*>(op->sendbuff);
    char* dst = static_cast<char*>(op->recvbuff);
    for (int p = 0; p < c.nranks; p++) {
      if (p == c.rank) {
        list(sends, p).push(copyStep(args(*op), dst + p * bytes, src + p * bytes, bytes));
        continue;
      }
      list(sends, p, op).push(sendStep(args(*op), p, src + p * bytes, bytes));
      list(recvs, p, op).push(recvStep(args(*op), p, dst + p * bytes, bytes));
    }
  }
  for (OpDesc* op : p2p) {
    const size_t bytes = op->count * dev::typeSize(op->type);
    if (op->peer == op->comm->rank) {
      (op->kind == OpKind::Send ? selfSends : selfRecvs).push_back(op);
      continue;
    }
    if (op->kind == OpKind::Send) {
      if (checked) {
        P2pHeader h = p2pHeader(bytes);
        // Written by the CPU: host memory whatever the backend (a device backend's copy from
        // host memory into the ring must handle it).
        w.scratch.emplace_back(new char[sizeof(h)], [](char* p) { delete[] p; });
        std::memcpy(w.scratch.back().get(), &h, sizeof(h));
        list(sends, op->peer).push(sendStep(CollArgs{}, op->peer, w.scratch.back().get(), sizeof(h)));
      }
      list(sends, op->peer, op).push(sendStep(args(*op), op->peer, static_cast<const char*>(op->sendbuff), bytes));
    } else if (checked) {
      checkedRecvs[op->peer].push_back(makeCheckedRecv(*op, &w.p2pMismatch, &w.p2pBroken));
    } else {
      list(recvs, op->peer, op).push(recvStep(args(*op), op->peer, static_cast<char*>(op->recvbuff), bytes));
    }
  }
  if (selfSends.size() != selfRecvs.size()) {
    WARN("rank %d: group has %zu sends to itself but %zu receives from itself; they must pair up",
         p2p.front()->comm->rank, selfSends.size(), selfRecvs.size());
    return ncclInvalidUsage;
  }
  for (size_t i = 0; i < selfSends.size(); i++) {
    OpDesc* s = selfSends[i];
    OpDesc* r = selfRecvs[i];
    size_t sb = s->count * dev::typeSize(s->type), rb = r->count * dev::typeSize(r->type);
    if (sb != rb) {
      WARN("rank %d: send to itself of %zu bytes pairs with a receive of %zu bytes", s->comm->rank, sb, rb);
      return ncclInvalidUsage;
    }
    list(sends, s->comm->rank)
        .push(copyStep(args(*s), static_cast<char*>(r->recvbuff), static_cast<const char*>(s->sendbuff), sb));
  }
  for (auto* m : {&sends, &recvs}) {
    for (auto& [peer, lists] : *m) {
      lanes.emplace_back();
      for (auto& [steps, stamp] : lists) {
        lanes.back().stampNext(stamp);
        lanes.back().add(std::move(steps));
      }
    }
  }
  for (auto& [peer, sources] : checkedRecvs) {
    lanes.emplace_back();
    for (auto& src : sources) lanes.back().add(std::move(src));
  }
  return ncclSuccess;
}

// Byte range an op reads (sends) or writes (receives) in a point-to-point batch.
struct Range {
  uintptr_t lo, hi;
  bool overlaps(const Range& o) const { return lo < o.hi && o.lo < hi; }
};
Range sendRange(const OpDesc& op) {
  size_t n = op.kind == OpKind::AlltoAll ? op.count * op.comm->nranks : op.count;
  uintptr_t lo = reinterpret_cast<uintptr_t>(op.sendbuff);
  return {lo, lo + n * dev::typeSize(op.type)};
}
Range recvRange(const OpDesc& op) {
  size_t n = op.kind == OpKind::AlltoAll ? op.count * op.comm->nranks : op.count;
  uintptr_t lo = reinterpret_cast<uintptr_t>(op.recvbuff);
  return {lo, lo + n * dev::typeSize(op.type)};
}

// Receives and sends of one batch run concurrently, so a send whose buffer a receive of the
// same batch also writes (in-place send/recv or all-to-all) reads a copy staged in a phase
// before the batch; otherwise an early receive could overwrite data not yet sent.
ncclResult_t stageOverlappingSends(CommWork& w, const std::vector<OpDesc*>& ops) {
  std::vector<Range> writes;
  for (OpDesc* op : ops)
    if (op->kind == OpKind::Recv || op->kind == OpKind::AlltoAll) writes.push_back(recvRange(*op));
  auto staging = std::make_unique<StepList>();
  bool any = false;
  for (OpDesc* op : ops) {
    if (op->kind != OpKind::Send && op->kind != OpKind::AlltoAll) continue;
    Range r = sendRange(*op);
    bool clash = false;
    for (const Range& wr : writes) clash = clash || r.overlaps(wr);
    if (!clash) continue;
    w.scratch.emplace_back();
    NCCLCHECK(w.comm->backend->scratch(r.hi - r.lo, &w.scratch.back()));
    CollArgs a;
    a.type = op->type;
    staging->push(copyStep(a, w.scratch.back().get(), static_cast<const char*>(op->sendbuff), r.hi - r.lo));
    op->sendbuff = w.scratch.back().get();
    any = true;
  }
  if (!any) return ncclSuccess;
  w.phases.emplace_back(1);
  w.phases.back().front().add(std::move(staging));
  return ncclSuccess;
}

// ACCL_CHECK_MISMATCH: phase 0 all-gathers the fingerprint of this work's collectives; the
// executor compares the table before phase 1 (sched/mismatch_check.h).
void addFingerprintPhase(CommWork& w, const std::vector<std::unique_ptr<OpDesc>>& ops) {
  const Comm& c = *w.comm;
  if (param::checkMismatch() != 2 || c.nranks == 1) return;
  std::vector<const OpDesc*> colls;
  for (const auto& op : ops)
    if (op->kind != OpKind::Send && op->kind != OpKind::Recv) colls.push_back(op.get());
  if (colls.empty()) return;
  w.fingerprints = std::make_unique<Fingerprint[]>(c.nranks + 1);
  w.fingerprints[c.nranks] = fingerprintOf(colls);
  CollArgs a;
  a.src = reinterpret_cast<const char*>(&w.fingerprints[c.nranks]);
  a.dst = reinterpret_cast<char*>(w.fingerprints.get());
  a.count = sizeof(Fingerprint);
  a.type = ncclUint8;
  a.rank = c.rank;
  a.nranks = c.nranks;
  a.pieceBytes = pieceBytes(c);
  w.phases.emplace_back(1);
  w.phases.back().front().add(makeRingAllGather(a));
}

}  // namespace

CollArgs collArgsOf(const OpDesc& op, const Comm& c) {
  CollArgs a;
  a.src = static_cast<const char*>(op.sendbuff);
  a.dst = static_cast<char*>(op.recvbuff);
  a.count = op.count;
  a.type = op.type;
  a.op = op.red;
  a.root = op.root;
  a.rank = c.rank;
  a.nranks = c.nranks;
  a.pieceBytes = pieceBytes(c);
  if (c.layout.ring.size() == static_cast<size_t>(c.nranks) && !c.layout.inRankOrder) {
    a.ringRanks = c.layout.ring.data();
    a.ringPos = c.layout.ringPos.data();
  }
  return a;
}

// A reduction writes each piece of its output right after reading the same piece of its
// input; when they are the same memory (in-place) those lines are in this core's cache, and a
// non-temporal store would first evict them (in-place ran 1.2-1.6x slower than out-of-place at
// 16-128 MiB). Gathers and broadcasts never rewrite what they read, so they keep streaming.
bool streamsOutput(const OpDesc& op, int nranks) {
  const size_t esize = dev::typeSize(op.type);
  const size_t outBytes = outputElems(op, nranks) * esize;
  if (outBytes < static_cast<size_t>(param::streamOutputBytes())) return false;
  if (!opReduces(op.kind)) return true;
  const auto in = reinterpret_cast<uintptr_t>(op.sendbuff), out = reinterpret_cast<uintptr_t>(op.recvbuff);
  const bool overlap = in < out + outBytes && out < in + inputElems(op, nranks) * esize;
  return !overlap;
}

std::vector<dev::StreamRef> otherStreams(const std::vector<std::unique_ptr<OpDesc>>& ops) {
  std::vector<dev::StreamRef> others;
  for (const auto& op : ops)
    if (!(op->stream == ops.front()->stream) && std::find(others.begin(), others.end(), op->stream) == others.end())
      others.push_back(op->stream);
  return others;
}

const char* refusedArgName(RefusedArg a) {
  switch (a) {
    case RefusedArg::None: return "none";
    case RefusedArg::Datatype: return "datatype";
    case RefusedArg::Count: return "count";
    case RefusedArg::Root: return "root";
    case RefusedArg::Op: return "op";
    case RefusedArg::SendBuff: return "sendbuff";
    case RefusedArg::RecvBuff: return "recvbuff";
    case RefusedArg::Overlap: return "overlapping sendbuff and recvbuff";
    case RefusedArg::Buffer: return "a buffer";
  }
  return "an argument";
}

const char* opKindName(OpKind k) {
  switch (k) {
    case OpKind::AllReduce: return "AllReduce";
    case OpKind::Broadcast: return "Broadcast";
    case OpKind::Reduce: return "Reduce";
    case OpKind::AllGather: return "AllGather";
    case OpKind::ReduceScatter: return "ReduceScatter";
    case OpKind::AlltoAll: return "AlltoAll";
    case OpKind::Gather: return "Gather";
    case OpKind::Scatter: return "Scatter";
    case OpKind::Send: return "Send";
    case OpKind::Recv: return "Recv";
  }
  return "?";
}

std::string describeCall(OpKind kind, size_t count, ncclDataType_t type, dev::RedKind red, bool avg, bool preMul,
                         int root) {
  std::string d = std::string(opKindName(kind)) + "(" + std::to_string(count) + " x " + dev::typeName(type);
  if (kind == OpKind::AllReduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter) {
    static const char* const reds[] = {"sum", "prod", "max", "min"};
    int r = static_cast<int>(red);
    d += std::string(", ") + (avg ? "avg" : preMul ? "premulsum" : r >= 0 && r < 4 ? reds[r] : "?");
  }
  if (kind == OpKind::Send || kind == OpKind::Recv) d += ", peer " + std::to_string(root);
  else if (root >= 0) d += ", root " + std::to_string(root);
  return d + ")";
}

ncclResult_t planWork(std::vector<std::unique_ptr<OpDesc>> ops, std::unique_ptr<CommWork>* out) {
  auto w = std::make_unique<CommWork>();
  w->comm = ops.front()->comm;
  w->stream = ops.front()->stream;
  addFingerprintPhase(*w, ops);
  std::vector<OpDesc*> p2p;
  bool collectiveLaneOpen = false;
  for (auto& op : ops) {
    if (op->refusedArg != RefusedArg::None) continue;  // a void call: no data (sched/op.h)
    switch (op->kind) {
      case OpKind::Send:
      case OpKind::Recv: p2p.push_back(op.get()); break;
      case OpKind::AlltoAll: {
        NCCLCHECK(stageOverlappingSends(*w, {op.get()}));
        w->phases.emplace_back();
        NCCLCHECK(addPointToPoint(*w, w->phases.back(), {}, {op.get()}));
        collectiveLaneOpen = false;
        break;
      }
      default:
        if (!collectiveLaneOpen) {
          w->phases.emplace_back(1);
          collectiveLaneOpen = true;
        }
        NCCLCHECK(addCollective(w->phases.back().front(), *w, *op));
        break;
    }
  }
  if (!p2p.empty()) {
    NCCLCHECK(stageOverlappingSends(*w, p2p));
    w->phases.emplace_back();
    NCCLCHECK(addPointToPoint(*w, w->phases.back(), p2p, {}));
  }
  w->ops = std::move(ops);
  *out = std::move(w);
  return ncclSuccess;
}

}  // namespace accl
