#include "sched/device_collective.h"
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>
#include "base/check.h"
#include "base/log.h"
#include "coll/algorithms.h"
#include "comm/kernel_path.h"
#include "sched/call_stamp.h"
#include "sched/device_grid.h"
#include "sched/direct_collective.h"
#include "sched/ll_collective.h"

namespace accl {
namespace {

using kern::KSegment;
using kern::KTask;
using kern::TaskKind;

// All-reduces up to this size send every rank's whole input to every peer and fold it there
// (one exchange); larger ones reduce a slice per rank and gather the slices (half the folding,
// and each byte crosses once per peer).
constexpr size_t kOneShotBytes = 2 * kern::kChunkBytes;

// The tasks of one launch while they are being put together.
class LaunchDraft {
 public:
  explicit LaunchDraft(const KernelPath& kp) { kp.fillCommon(&args_); }
  // The rank whose tasks the calls below add.
  void forRank(int rank) { rank_ = rank; }
  // The grid the tuner chose for the rank's op (the launch takes the most threads any asks for).
  void setGrid(int rank, const DeviceGrid& g) {
    grids_[rank] = g;
    threads_ = std::max(threads_, g.threads);
  }
  int rank() const { return rank_; }
  // The task for (rank, kind, peer, ch), made on first use: one block per stream of bytes.
  int task(TaskKind kind, int peer, int ch) {
    for (size_t i = 0; i < tasks_.size(); i++)
      if (tasks_[i].t.kind == kind && tasks_[i].t.rank == rank_ && tasks_[i].t.peer == peer && tasks_[i].t.ch == ch &&
          kind != TaskKind::Fold)
        return static_cast<int>(i);
    Draft d{};
    d.t.kind = kind;
    d.t.rank = static_cast<int16_t>(rank_);
    d.t.peer = static_cast<int16_t>(peer);
    d.t.ch = static_cast<uint8_t>(ch);
    tasks_.push_back(d);
    return static_cast<int>(tasks_.size() - 1);
  }
  void add(int task, const char* src, char* dst, size_t bytes, uint32_t foldWait = 0, bool scaled = false) {
    KSegment s{};
    s.src = src;
    s.dst = dst;
    s.bytes = bytes;
    s.foldWait = foldWait;
    s.scaled = scaled ? 1 : 0;
    tasks_[task].segs.push_back(s);
  }
  void send(int peer, int ch, const char* src, size_t bytes, bool scaled = false, uint32_t foldWait = 0) {
    add(task(TaskKind::Send, peer, ch), src, nullptr, bytes, foldWait, scaled);
  }
  void recv(int peer, int ch, char* dst, size_t bytes) { add(task(TaskKind::Recv, peer, ch), nullptr, dst, bytes); }
  void copy(const char* src, char* dst, size_t bytes) {
    if (src != dst && bytes) add(task(TaskKind::Copy, -1, 0), src, dst, bytes);
  }
  // inPlace: the sends read what the fold overwrites (chunk by chunk, it waits for them).
  void fold(int ch, const char* src, char* dst, size_t bytes, bool inPlace = false) {
    add(task(TaskKind::Fold, -1, ch), src, dst, bytes, inPlace ? 1 : 0);
  }
  kern::CollKernelArgs& args() { return args_; }

  // Lays the tasks out in the arguments; an error (WARNed) when they do not fit.
  ncclResult_t finish(const char* what) {
    assignBlocks();
    size_t segs = 0;
    for (const Draft& d : tasks_) segs += d.segs.size();
    if (tasks_.size() > static_cast<size_t>(kern::kMaxTasks) || segs > static_cast<size_t>(kern::kMaxSegments)) {
      WARN("%s: %zu streams of %zu pieces do not fit one launch of the collective kernel (at most %d and %d): split "
           "the group",
           what, tasks_.size(), segs, kern::kMaxTasks, kern::kMaxSegments);
      return ncclInvalidUsage;
    }
    uint16_t next = 0;
    int n = 0;
    for (Draft& d : tasks_) {
      d.t.firstSegment = next;
      d.t.segments = static_cast<uint16_t>(d.segs.size());
      for (const KSegment& s : d.segs) args_.segments[next++] = s;
      if (d.segs.empty()) continue;
      args_.tasks[n++] = d.t;
    }
    args_.ntasks = n;
    args_.nblocks = 0;
    for (int i = 0; i < n; i++) args_.nblocks += args_.tasks[i].blocks;
    args_.threads = threads_;
    return ncclSuccess;
  }

 private:
  // Each rank's blocks (its grid's blocksPerRank, at least one per task, and all ranks of the
  // launch together at most kMaxLaunchBlocks, which the resident check at set-up counts on)
  // shared among its tasks: one each, then the rest one at a time, the fold first (it reads
  // every rank's input), each task at most kMaxTaskBlocks and one per 16 KiB it moves (a task
  // of a few bytes gains nothing from more blocks).
  void assignBlocks() {
    int ranks = 0;
    for (const auto& [rank, g] : grids_) ranks += g.blocksPerRank > 0;
    const int share = ranks ? kern::kMaxLaunchBlocks / ranks : 1;
    for (const auto& [rank, g] : grids_) {
      std::vector<Draft*> mine;
      for (Draft& d : tasks_)
        if (d.t.rank == rank && !d.segs.empty()) mine.push_back(&d);
      std::stable_sort(mine.begin(), mine.end(), [](const Draft* x, const Draft* y) {
        return x->t.kind == TaskKind::Fold && y->t.kind != TaskKind::Fold;
      });
      int left = std::min(g.blocksPerRank, share) - static_cast<int>(mine.size());
      for (Draft* d : mine) d->t.blocks = 1;
      for (bool grew = true; left > 0 && grew;) {
        grew = false;
        for (Draft* d : mine) {
          uint64_t bytes = 0;
          for (const KSegment& s : d->segs) bytes += s.bytes;
          if (left == 0 || d->t.blocks >= kern::kMaxTaskBlocks || bytes < (uint64_t{d->t.blocks} + 1) * (16 << 10))
            continue;
          d->t.blocks++;
          left--;
          grew = true;
        }
      }
    }
    for (Draft& d : tasks_)
      if (d.t.blocks == 0) d.t.blocks = 1;
  }

  struct Draft {
    KTask t;
    std::vector<KSegment> segs;
  };
  kern::CollKernelArgs args_;
  std::vector<Draft> tasks_;
  std::map<int, DeviceGrid> grids_;
  unsigned threads_ = 64;
  int rank_ = 0;
};

// The op's call stamp (sched/call_stamp.h; magic 0 when calls carry none), as the kernels check it.
void setStamp(const OpDesc& op, int rank, kern::CollKernelArgs* a) {
  static_assert(sizeof(kern::KStamp) == sizeof(CallStamp) && offsetof(kern::KStamp, count) == offsetof(CallStamp, count) &&
                offsetof(kern::KStamp, kind) == offsetof(CallStamp, kind));
  std::memcpy(&a->stamp[rank], &op.stamp, sizeof(CallStamp));
}

void setScalar(const OpDesc& op, int rank, kern::CollKernelArgs* a) {
  if (!op.preMul) return;
  if (op.deviceScalar) {
    a->scalarKind[rank] = kern::ScalarKind::Device;
    a->scalarPtr[rank] = op.deviceScalar;
  } else {
    a->scalarKind[rank] = kern::ScalarKind::Immediate;
    std::memcpy(a->scalarBytes[rank], op.scalar, sizeof(a->scalarBytes[rank]));
  }
}

struct Span {
  uintptr_t lo, hi;
  bool overlaps(const Span& o) const { return lo < o.hi && o.lo < hi; }
};
Span spanOf(const void* p, size_t bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  return {lo, lo + bytes};
}

// One collective's tasks on this rank.
void buildCollective(const OpDesc& op, int rank, int n, LaunchDraft* d) {
  d->forRank(rank);
  const size_t esize = dev::typeSize(op.type);
  const size_t bytes = op.count * esize;
  const char* in = static_cast<const char*>(op.sendbuff);
  char* out = static_cast<char*>(op.recvbuff);
  const bool scaled = op.preMul;
  d->args().divisor = op.avg ? static_cast<uint32_t>(n) : 1;
  setScalar(op, rank, &d->args());
  setStamp(op, rank, &d->args());
  switch (op.kind) {
    case OpKind::AllReduce:
      if (bytes <= kOneShotBytes) {
        for (int p = 0; p < n; p++)
          if (p != rank) d->send(p, 0, in, bytes, scaled);
        d->fold(0, in, out, bytes, spanOf(in, bytes).overlaps(spanOf(out, bytes)));
      } else {
        const Slices sl{op.count, n};
        const size_t mine = sl.start(rank) * esize, mineLen = sl.len(rank) * esize;
        for (int p = 0; p < n; p++) {
          if (p == rank) continue;
          d->send(p, 0, in + sl.start(p) * esize, sl.len(p) * esize, scaled);
          d->send(p, 1, out + mine, mineLen, false, /*foldWait=*/1);
          d->recv(p, 1, out + sl.start(p) * esize, sl.len(p) * esize);
        }
        d->fold(0, in + mine, out + mine, mineLen);
      }
      break;
    case OpKind::Reduce:
      if (rank == op.root) d->fold(0, in, out, bytes);
      else d->send(op.root, 0, in, bytes, scaled);
      break;
    case OpKind::ReduceScatter:
      for (int p = 0; p < n; p++)
        if (p != rank) d->send(p, 0, in + p * bytes, bytes, scaled);
      d->fold(0, in + rank * bytes, out, bytes);
      break;
    case OpKind::Broadcast:
      if (rank == op.root) {
        for (int p = 0; p < n; p++)
          if (p != rank) d->send(p, 0, in, bytes);
        d->copy(in, out, bytes);
      } else {
        d->recv(op.root, 0, out, bytes);
      }
      break;
    case OpKind::AllGather:
      for (int p = 0; p < n; p++) {
        if (p == rank) continue;
        d->send(p, 0, in, bytes);
        d->recv(p, 0, out + p * bytes, bytes);
      }
      d->copy(in, out + rank * bytes, bytes);
      break;
    case OpKind::Gather:
      if (rank == op.root) {
        for (int p = 0; p < n; p++)
          if (p != rank) d->recv(p, 0, out + p * bytes, bytes);
        d->copy(in, out + rank * bytes, bytes);
      } else {
        d->send(op.root, 0, in, bytes);
      }
      break;
    case OpKind::Scatter:
      if (rank == op.root) {
        for (int p = 0; p < n; p++)
          if (p != rank) d->send(p, 0, in + p * bytes, bytes);
        d->copy(in + rank * bytes, out, bytes);
      } else {
        d->recv(op.root, 0, out, bytes);
      }
      break;
    case OpKind::AlltoAll:
      for (int p = 0; p < n; p++) {
        if (p == rank) continue;
        d->send(p, 0, in + p * bytes, bytes);
        d->recv(p, 0, out + p * bytes, bytes);
      }
      d->copy(in + rank * bytes, out + rank * bytes, bytes);
      break;
    case OpKind::Send:
    case OpKind::Recv:
      break;  // buildPointToPoint
  }
}

// Queues a copy of `bytes` at src into staging memory at dst on `stream`, ahead of the launch.
ncclResult_t copyAside(dev::Backend& backend, const dev::StreamRef& stream, char* dst, const void* src, size_t bytes) {
  backend.copy(stream, dst, src, bytes, false);
  return backend.failed() ? ncclUnhandledCudaError : ncclSuccess;
}

// Where the kernel reaches the op's buffers (mapped pinned host memory through its device
// mapping): asked once per op, before its tasks are built.
void toKernelAddresses(dev::Backend& backend, OpDesc* op) {
  op->sendbuff = backend.kernelAddress(op->sendbuff);
  op->recvbuff = const_cast<void*>(backend.kernelAddress(op->recvbuff));
  op->deviceScalar = backend.kernelAddress(op->deviceScalar);
}

// A group's sends and receives (and in-place all-to-all) in one launch: sends to a peer in
// call order on channel 0, receives likewise; a send to self is a local copy of the matching
// receive. Sends that a receive of the launch overwrites are staged first (stream-ordered
// copies into the communicator's staging memory), as the receives may land before they are sent.
ncclResult_t buildPointToPoint(std::vector<OpDesc*>& p2p, KernelPath& kp, const dev::StreamRef& stream,
                               bool capturing, int rank, LaunchDraft* d, dev::Backend& backend) {
  d->forRank(rank);
  // Every send and receive of the group carries the same call number (the last collective
  // before the group); the kernel puts each one's size and sender in.
  d->args().p2p = 1;
  setStamp(*p2p.front(), rank, &d->args());
  std::vector<Span> writes;
  for (OpDesc* op : p2p)
    if (op->kind == OpKind::Recv) writes.push_back(spanOf(op->recvbuff, op->count * dev::typeSize(op->type)));
  size_t stageBytes = 0;
  std::vector<std::pair<OpDesc*, size_t>> staged;  // op, offset in staging
  for (OpDesc* op : p2p) {
    if (op->kind != OpKind::Send || op->peer == rank) continue;
    const Span s = spanOf(op->sendbuff, op->count * dev::typeSize(op->type));
    bool clash = false;
    for (const Span& w : writes) clash = clash || s.overlaps(w);
    if (!clash) continue;
    staged.push_back({op, stageBytes});
    stageBytes += (s.hi - s.lo + 15) & ~size_t{15};
  }
  if (!staged.empty()) {
    char* base = nullptr;
    NCCLCHECK(kp.staging(stageBytes, capturing, &base));
    for (auto& [op, off] : staged) {
      NCCLCHECK(copyAside(backend, stream, base + off, op->sendbuff, op->count * dev::typeSize(op->type)));
      op->sendbuff = base + off;
    }
  }
  std::vector<OpDesc*> selfSends, selfRecvs;
  for (OpDesc* op : p2p) {
    toKernelAddresses(backend, op);
    const size_t b = op->count * dev::typeSize(op->type);
    if (op->peer == rank) {
      (op->kind == OpKind::Send ? selfSends : selfRecvs).push_back(op);
      continue;
    }
    if (op->kind == OpKind::Send) d->send(op->peer, 0, static_cast<const char*>(op->sendbuff), b);
    else d->recv(op->peer, 0, static_cast<char*>(op->recvbuff), b);
  }
  if (selfSends.size() != selfRecvs.size()) {
    WARN("rank %d: a group has %zu send(s) to this rank itself but %zu receive(s) from it", rank, selfSends.size(),
         selfRecvs.size());
    return ncclInvalidUsage;
  }
  for (size_t i = 0; i < selfSends.size(); i++)
    d->copy(static_cast<const char*>(selfSends[i]->sendbuff), static_cast<char*>(selfRecvs[i]->recvbuff),
            std::min(selfSends[i]->count * dev::typeSize(selfSends[i]->type),
                     selfRecvs[i]->count * dev::typeSize(selfRecvs[i]->type)));
  return ncclSuccess;
}

// Copies an in-place (or overlapping) all-to-all's input aside first: a peer's block may land
// in our buffer before ours to that peer has been sent.
ncclResult_t stageAlltoAll(OpDesc* op, KernelPath& kp, dev::Backend& backend, const dev::StreamRef& s,
                           bool capturing) {
  const size_t b = op->count * dev::typeSize(op->type) * op->comm->nranks;
  if (!spanOf(op->sendbuff, b).overlaps(spanOf(op->recvbuff, b))) return ncclSuccess;
  char* staged = nullptr;
  NCCLCHECK(kp.staging(b, capturing, &staged));
  NCCLCHECK(copyAside(backend, s, staged, op->sendbuff, b));
  op->sendbuff = staged;
  return ncclSuccess;
}

}  // namespace

ncclResult_t launchKernelOps(std::vector<std::unique_ptr<OpDesc>> ops, std::function<bool()>* launched) {
  // Per rank (Comm object) in this launch, its collectives in call order and its sends/receives.
  struct RankOps {
    Comm* comm;
    std::vector<OpDesc*> colls, p2p;
  };
  std::vector<RankOps> ranks;
  for (auto& op : ops) {
    auto it = std::find_if(ranks.begin(), ranks.end(), [&](const RankOps& r) { return r.comm == op->comm.get(); });
    if (it == ranks.end()) {
      ranks.push_back({op->comm.get(), {}, {}});
      it = ranks.end() - 1;
    }
    (op->isP2p() ? it->p2p : it->colls).push_back(op.get());
  }
  Comm& c0 = *ranks.front().comm;
  dev::Backend& backend = *c0.backend;
  const dev::StreamRef first = ops.front()->stream;
  // A kernel that gave up: a mismatch froze the communicator (this call realigns its streams
  // with the other ranks' next calls, and fails), anything else failed it.
  std::vector<Comm*> frozen;
  for (RankOps& r : ranks) {
    const ncclResult_t k = r.comm->kernelPath->checkKernels(*r.comm, describeStampBytes);
    if (k == ncclInvalidUsage && r.comm->kernelPath->frozen() && r.comm->asyncError.load() == ncclSuccess)
      frozen.push_back(r.comm);
    else if (k != ncclSuccess)
      return k;
  }
  if (!frozen.empty()) {
    if (backend.streamCapturing(first)) {
      WARN("rank %d: mismatched calls froze this communicator; its streams are realigned by the next call made outside "
           "a stream capture (this one fails)",
           frozen.front()->rank);
      return ncclInvalidUsage;
    }
    return realignKernelPaths(frozen);
  }
  for (RankOps& r : ranks) {
    uint32_t top = 0;
    for (const OpDesc* op : r.colls) top = std::max(top, op->stamp.seq);
    NCCLCHECK(r.comm->kernelPath->admitCall(*r.comm, top));
  }
  const std::vector<dev::StreamRef> others = otherStreams(ops);
  for (const dev::StreamRef& o : others) backend.orderAfter(o, {first});
  const bool capturing = backend.streamCapturing(first);
  for (RankOps& r : ranks) r.comm->kernelPath->orderAfterPrevious(backend, first, capturing);
  // Every rank counts its launches (launch_order.h), or none does and an event marks them.
  const bool counted = std::all_of(ranks.begin(), ranks.end(),
                                   [](const RankOps& r) { return r.comm->kernelPath->countsLaunches(); });
  // A launch's LaunchDone: each counted rank with tasks in it takes its next launch number.
  auto countLaunch = [counted](std::vector<RankOps>& rs, bool capt, kern::CollKernelArgs* a) {
    if (!counted) return;
    for (RankOps& r : rs) {
      bool carried = false;
      for (int t = 0; t < a->ntasks; t++) carried = carried || a->tasks[t].rank == r.comm->rank;
      if (carried) r.comm->kernelPath->countLaunch(&a->done, capt);
    }
  };

  // Launch j carries collective j of every rank here (ranks of one communicator queued on one
  // stream by one thread: separate launches would wait for each other forever).
  size_t launches = 0;
  for (const RankOps& r : ranks) launches = std::max(launches, r.colls.size());
  for (size_t j = 0; j < launches; j++) {
    // Collectives on each other's buffers in place (sched/direct_collective.h) take their own launch.
    // Small ones go in one pass of flagged lines through the mailboxes (sched/ll_collective.h).
    std::vector<OpDesc*> direct, ll;
    for (RankOps& r : ranks) {
      if (j >= r.colls.size()) continue;
      if (directEligible(*r.colls[j], *r.comm->kernelPath)) direct.push_back(r.colls[j]);
      else if (llEligible(*r.colls[j], *r.comm->kernelPath)) ll.push_back(r.colls[j]);
    }
    for (OpDesc* op : direct) toKernelAddresses(backend, op);
    for (OpDesc* op : ll) toKernelAddresses(backend, op);
    if (!direct.empty()) NCCLCHECK(launchDirectOps(direct, first, counted && !capturing));
    if (!ll.empty()) NCCLCHECK(launchLlOps(ll, first, counted && !capturing));
    LaunchDraft d(*c0.kernelPath);
    const OpDesc* lead = nullptr;
    for (RankOps& r : ranks) {
      if (j >= r.colls.size() || std::find(direct.begin(), direct.end(), r.colls[j]) != direct.end() ||
          std::find(ll.begin(), ll.end(), r.colls[j]) != ll.end())
        continue;
      OpDesc* op = r.colls[j];
      if (op->kind == OpKind::AlltoAll) NCCLCHECK(stageAlltoAll(op, *r.comm->kernelPath, backend, first, capturing));
      toKernelAddresses(backend, op);
      r.comm->kernelPath->fillRank(&d.args());
      buildCollective(*op, r.comm->rank, r.comm->nranks, &d);
      d.setGrid(r.comm->rank, chooseDeviceGrid(op->kind, op->count * dev::typeSize(op->type), r.comm->nranks,
                                               backend.multiprocessors()));
      if (!lead) lead = op;
    }
    if (!lead) continue;
    NCCLCHECK(d.finish(lead->describe().c_str()));
    countLaunch(ranks, capturing, &d.args());
    if (d.args().ntasks > 0) NCCLCHECK(backend.launchCollective(first, lead->type, lead->red, d.args()));
  }
  bool anyP2p = false;
  LaunchDraft d(*c0.kernelPath);
  for (RankOps& r : ranks) {
    if (r.p2p.empty()) continue;
    anyP2p = true;
    r.comm->kernelPath->fillRank(&d.args());
    size_t largest = 0;
    for (const OpDesc* op : r.p2p) largest = std::max(largest, op->count * dev::typeSize(op->type));
    d.setGrid(r.comm->rank, chooseDeviceGrid(r.p2p.front()->kind, largest, r.comm->nranks, backend.multiprocessors()));
    NCCLCHECK(buildPointToPoint(r.p2p, *r.comm->kernelPath, first, capturing, r.comm->rank, &d, backend));
  }
  if (anyP2p) {
    NCCLCHECK(d.finish("a group's sends and receives"));
    countLaunch(ranks, capturing, &d.args());
    if (d.args().ntasks > 0) NCCLCHECK(backend.launchCollective(first, ncclInt8, dev::RedKind::Sum, d.args()));
  }
  if (counted) {
    // Each rank's kernels said where they end (its launch counter): nothing more to queue.
    const uint64_t streamId = capturing ? 0 : backend.streamIdentity(first);
    std::vector<std::function<bool()>> probes;
    for (RankOps& r : ranks) {
      const LaunchMark m = r.comm->kernelPath->markCounted(streamId, capturing);
      if (launched && !m.empty()) probes.push_back(LaunchOrder::probe(backend, m));
    }
    if (launched)
      *launched = [probes] { return std::all_of(probes.begin(), probes.end(), [](const auto& p) { return p(); }); };
  } else {
    // One marker after the launches, for every rank of them (and the stream claim): one event
    // record per call, from the backend's pool.
    std::shared_ptr<void> marker;
    if (!capturing) {
      marker = backend.newMarker();
      backend.recordMarker(marker, first);
    }
    const uint64_t streamId = marker ? backend.streamIdentity(first) : 0;
    for (RankOps& r : ranks) r.comm->kernelPath->markLaunched(marker, streamId, capturing);
    if (launched) *launched = backend.markerProbe(marker);
  }
  if (!others.empty()) backend.orderAfter(first, others);
  return ncclSuccess;
}

}  // namespace accl
