#include "sched/tuner.h"
#include <strings.h>
#include <mutex>
#include "base/log.h"
#include "base/param.h"
#include "sched/cost_model.h"

namespace accl {

size_t shmDirectLimit(OpKind kind, int nranks, int64_t overrideBytes) {
  if (kind != OpKind::AllReduce && kind != OpKind::AllGather) return 0;
  if (overrideBytes >= 0) return static_cast<size_t>(overrideBytes);
  // Crossovers of ShmDirect against the default (Tree/Ring) measured side by side on 2 vCPUs,
  // out-of-place, best-of-5 and median agreeing (in-place agrees except all-gather at np2):
  //   for a in "" ShmDirect: NCCL_ALGO=$a accl-run -np N all_{reduce,gather}_perf -b 2K -e 16M -f 2 -c 0 -y 1
  // All-gather (per-rank input): np2 within 5% either way above 8 KiB; np4 1.3-1.5x up to
  // 256 KiB, even at 512K-1M; np8 1.3-3x up to 512 KiB.
  // All-reduce, folded in slices from 32 KiB (shmSliceMin), 2-3 rounds interleaved:
  //   for c in "ShmDirect 1" "ShmDirect 0" "Ring 0" "Tree 0"; do set -- $c; NCCL_ALGO=$1 ACCL_SHM_SLICE_BYTES=$2
  //     chrt -f 1 accl-run -np N all_reduce_perf -b 2K -e 16M -f 4 -n 200 -w 20 -c 0 -y 1; done
  //   np2: whole folds win up to 8 KiB (16K: 3.0 vs Ring 2.8 us); the Ring beats slices at
  //        every size (64K: 6.2 vs 9.2 us, 1M: 67 vs 81), so no board above 8 KiB;
  //   np4: whole folds up to 16K (8K: 6.1 vs 10 sliced); slices 13-15 us at 32K against Ring
  //        18-22 and whole 16; even with the Ring at 512K-4M (101-116 vs 94-147 us at 512K);
  //   np8 (4 ranks a core): slices 39 us at 32K (whole 48, Ring 78), 85 at 128K (200, 125),
  //        259 at 512K (625-690, 370-440); the Ring wins from 1M (860 vs 1220-1400 us).
  if (kind == OpKind::AllReduce) return nranks <= 2 ? 8 << 10 : 512 << 10;
  if (nranks <= 2) return 8 << 10;
  if (nranks <= 4) return 256 << 10;
  return 512 << 10;
}

size_t shmReadMin(OpKind kind, int nranks, int64_t overrideBytes) {
  if (kind != OpKind::AllGather) return 0;
  if (overrideBytes >= 0) return static_cast<size_t>(overrideBytes);
  // Measured side by side on 2 vCPUs, out-of-place, best-of-3 and median, interleaved, under the
  // normal scheduler and under chrt -f 1 (as perf/compare.py --realtime):
  //   for v in 0 1: ACCL_SHM_READ_BYTES=$v [chrt -f 1] accl-run -np N all_gather_perf -b S -e S -c 0 -y 1
  // Reading in place against the default (ring / board), best of 3, flips with the machine's
  // state. In one state (16:00-16:05 on a shared machine) it won under chrt from 32 KiB per rank
  // (np2 2.7-4.8x, np4 2.4x at 1 MiB) and from 1 MiB without (np2 0.93-1.9x, np4 1.4x); twenty
  // minutes later the ring had got 4x faster and beat it at every size, with chrt or without
  // (np2 1-16 MiB per rank: ring 1.2-1.6x faster; np4 1-4 MiB: ring 1.1-1.4x under chrt, mixed
  // without). Not a robust win here, so the tuner never picks it; ACCL_SHM_READ_BYTES opts in
  // (to be measured on machines with real cores, where OpenMPI uses the same mechanism).
  (void)nranks;
  return 0;
}

size_t shmSliceMin(OpKind kind, int nranks, int64_t overrideBytes) {
  if (kind != OpKind::AllReduce) return 0;
  if (overrideBytes >= 0) return static_cast<size_t>(overrideBytes);
  // Whole folds (every rank reduces every input, one synchronisation) win while the data is
  // small; slices (two synchronisations, each rank reads ~2 inputs' worth) from 32 KiB at
  // np4 and np8, and also at np2 when NCCL_ALGO forces ShmDirect (128K: 16.7 vs 21 us).
  // Measured with shmDirectLimit's commands above.
  (void)nranks;
  return 32 << 10;
}

bool useShmSlices(OpKind kind, size_t bytes, int nranks) {
  const size_t min = shmSliceMin(kind, nranks, param::shmSliceBytes());
  return min > 0 && bytes >= min;
}

size_t allPairsLimit(int nranks, int64_t overrideBytes) {
  if (overrideBytes >= 0) return static_cast<size_t>(overrideBytes);
  // Measured over sockets on 2 vCPUs (NCCL_SHM_DISABLE=1), interleaved, against recursive
  // doubling (Tree):
  //   for a in Tree AllPairs: NCCL_ALGO=$a accl-run -np N all_reduce_perf -b S -e S -c 0 -y 1
  // np2: the same messages (one exchange) without the local copy; 8 B 16.8/25.1 us (best/median
  // of 8) vs 19.4/23.1, 32 KiB 44.5/45.8 vs 43.6/52.1: equal within the noise, so AllPairs
  // takes the Tree's sizes. np3 and np4 (ranks share the cores) 8 B: 1.3-1.5x slower on
  // loopback, up to 4x across network namespaces: n-1 sends and receives per rank cost more
  // CPU than recursive doubling's log2(n) rounds when ranks wait for cores, not for the wire.
  // Not measured where every rank has its own core or host (one hop against log2(n) there).
  return nranks == 2 ? size_t{64} << 10 : 0;
}

size_t treeLimit(int nranks, bool board, int64_t overrideBytes) {
  if (overrideBytes >= 0) return static_cast<size_t>(overrideBytes);
  // Two ranks on one host: recursive doubling is one exchange (each rank posts its input and
  // folds its peer's straight into its output) where the ring takes two steps and a copy more.
  // Measured on 2 vCPUs, interleaved, 3 rounds, chrt -f 50:
  //   for a in Ring Tree: NCCL_ALGO=$a accl-run -np 2 all_reduce_perf -b 256K -e 8M -f 2 -c 0 -y 1
  // out-of-place / in-place us: 256K 16.5-16.6/14.5-14.7 vs Ring 17.3-17.4/16.1-16.7; 1M 58-59/51-52
  // vs 66-67/62-64; from 2M the ring wins out of place (2M 296-314 vs 246-255). Over sockets
  // (no board) AllPairs takes np2 up to 64 KiB and the ring the rest, as measured there.
  if (nranks == 2 && board) return size_t{1} << 20;
  return size_t{64} << 10;
}

bool useShmRead(OpKind kind, size_t bytes, int nranks, bool boardReads) {
  const size_t min = shmReadMin(kind, nranks, param::shmReadBytes());
  return boardReads && min > 0 && bytes >= min;
}

Algo chooseAlgo(const AlgoPolicy& policy, OpKind kind, size_t bytes, int nranks, size_t boardBytes,
                bool boardReads, const TopoShape* shape, std::string* why) {
  int f;
  switch (kind) {
    case OpKind::Broadcast: f = 0; break;
    case OpKind::Reduce: f = 1; break;
    case OpKind::AllGather: f = 2; break;
    case OpKind::ReduceScatter: f = 3; break;
    case OpKind::AllReduce: f = 4; break;
    default: return Algo::Tree;
  }
  uint8_t allowed = policy.allowed[f];
  // ShmDirect: all-reduce and all-gather up to shmDirectLimit per rank when the communicator
  // has a board (boardBytes: its slot size; 0 none); elsewhere not an option.
  const bool boardKind = (kind == OpKind::AllReduce || kind == OpKind::AllGather) && boardBytes > 0;
  if (boardKind && allowed == kAlgoShmDirect) return Algo::ShmDirect;  // forced: any size, in board-sized chunks
  if (boardKind && bytes <= shmDirectLimit(kind, nranks, param::shmDirectBytes()) && (allowed & kAlgoShmDirect))
    return Algo::ShmDirect;
  if (boardKind && useShmRead(kind, bytes, nranks, boardReads) && (allowed & kAlgoShmDirect)) return Algo::ShmDirect;
  // AllPairs: all-reduces over connections (no board, or NCCL_ALGO leaves nothing else).
  if (kind == OpKind::AllReduce && (allowed & kAlgoAllPairs)) {
    if ((allowed & (kAlgoRing | kAlgoTree)) == 0) return Algo::AllPairs;  // forced: any size, piece by piece
    if (boardBytes == 0 && bytes <= allPairsLimit(nranks, param::allPairsBytes())) return Algo::AllPairs;
  }
  // HierRing: all-reduces, all-gathers and reduce-scatters over several hosts with the same
  // number (> 1) of ranks on each.
  const bool multiHost = shape && shape->hosts > 1;
  const bool hierKind = kind == OpKind::AllReduce || kind == OpKind::AllGather || kind == OpKind::ReduceScatter;
  const bool hierShape = hierKind && multiHost && shape->ranksPerHost > 1;
  allowed &= kAlgoRing | kAlgoTree | (hierShape ? kAlgoHierRing : 0);
  if (allowed == 0) allowed = kAlgoRing | kAlgoTree;  // only ShmDirect allowed, and it cannot run
  if (allowed == kAlgoRing) return Algo::Ring;
  if (allowed == kAlgoTree) return Algo::Tree;
  if (allowed == kAlgoHierRing) return Algo::HierRing;
  // All-gather and reduce-scatter have no separate latency algorithm: the ring, or across hosts
  // HierRing where the cost model finds it cheaper.
  if (kind == OpKind::AllGather || kind == OpKind::ReduceScatter) {
    if (hierShape && (allowed & kAlgoHierRing) && (allowed & kAlgoRing))
      return cheapestAlgo(kind, kAlgoRing | kAlgoHierRing, bytes, nranks, *shape, measuredLinks(), why);
    return (allowed & kAlgoRing) || !hierShape ? Algo::Ring : Algo::HierRing;
  }
  if (kind == OpKind::AllReduce && multiHost && param::treeThreshold() < 0)
    return cheapestAllReduce(allowed, bytes, nranks, *shape, measuredLinks(), why);
  if (nranks <= 2 && kind != OpKind::AllReduce) return Algo::Tree;  // a chain of two is a flat tree
  return bytes <= treeLimit(nranks, boardBytes > 0, param::treeThreshold()) ? Algo::Tree : Algo::Ring;
}

const char* treeShapeName(TreeShape s) {
  switch (s) {
    case TreeShape::Binomial: return "binomial";
    case TreeShape::Flat: return "flat";
    default: return "doubling";
  }
}

TreeShape chooseTreeShape(size_t bytes, int nranks, const TopoShape* shape) {
  const std::string forced = param::treeShape();
  if (strcasecmp(forced.c_str(), "doubling") == 0) return TreeShape::Doubling;
  if (strcasecmp(forced.c_str(), "binomial") == 0) return TreeShape::Binomial;
  if (strcasecmp(forced.c_str(), "flat") == 0) return TreeShape::Flat;
  if (!forced.empty()) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      WARN("ACCL_TREE_SHAPE=\"%s\" is none of doubling, binomial, flat: the cost model picks the shape", forced.c_str());
    });
  }
  if (shape && shape->hosts > 1) return cheaperTreeShape(bytes, nranks, *shape, measuredLinks());
  return TreeShape::Doubling;
}

const char* algoName(Algo a) {
  switch (a) {
    case Algo::Ring: return "Ring";
    case Algo::Tree: return "Tree";
    case Algo::ShmDirect: return "ShmDirect";
    case Algo::AllPairs: return "AllPairs";
    case Algo::HierRing: return "HierRing";
  }
  return "?";
}

}  // namespace accl
