// algorithms.h: every algorithm, as a factory of one rank's steps. One algorithm per file:
//   ring_allreduce.cc, recursive_doubling_allreduce.cc, binomial_tree_allreduce.cc, ring_allgather.cc,
//   ring_reduce_scatter.cc, ring_broadcast.cc, chain_reduce.cc, direct.cc (flat trees:
//   broadcast, reduce, gather, scatter for small messages and rooted ops), rank_order_reduce.cc
//   (ACCL_DETERMINISTIC: every element reduced left to right in rank order; its gathered
//   all-reduce is also NCCL_ALGO=AllPairs), shm_direct.cc
//   (small all-reduce/all-gather through the shared-memory board; also rank order).
// Counts are in elements; buffers are the op's (already pre-scaled) input and output.
#pragma once
#include <memory>
#include <vector>
#include "coll/step.h"
#include "topo/rank_layout.h"

namespace accl {

struct CollArgs {
  const char* src = nullptr;
  char* dst = nullptr;
  size_t count = 0;  // allreduce/bcast/reduce: total; allgather/reducescatter/gather/scatter: per rank
  ncclDataType_t type = ncclInt8;
  dev::RedKind op = dev::RedKind::Sum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  size_t pieceBytes = 128 << 10;  // pipelining granularity; must be <= channel capacity / 2
  // The ring order the ring and chain algorithms follow (topo/rank_layout.h: each host's ranks
  // together, so the ring crosses each host boundary once): position -> rank and rank ->
  // position, nranks entries each; null: rank order.
  const int* ringRanks = nullptr;
  const int* ringPos = nullptr;
  // Where each rank's block of a reduce-scatter's input lies: rank -> block index (null: the
  // rank itself). HierRing's phase across hosts reduces blocks kept by host (one per host).
  const int* blockOf = nullptr;

  int posOf(int r) const { return ringPos ? ringPos[r] : r; }
  int pos() const { return posOf(rank); }
  int blockIdx(int r) const { return blockOf ? blockOf[r] : r; }
  // The rank at ring position p (taken modulo nranks).
  int rankAt(int p) const {
    const int q = ((p % nranks) + nranks) % nranks;
    return ringRanks ? ringRanks[q] : q;
  }
};

std::unique_ptr<StepSource> makeRingAllReduce(const CollArgs& a);
// One half of the ring all-reduce (the hierarchical all-reduce's intra-host phases): the
// reduce-scatter leaves the rank at ring position p the reduced slice (p+1) % nranks of
// Slices{count, nranks} in dst; the all-gather starts from that slice in dst and fills the rest.
enum class RingPart { Whole, ReduceScatter, AllGather };
std::unique_ptr<StepSource> makeRingAllReducePart(const CollArgs& a, RingPart part);
// hier_allreduce.cc: reduce-scatter inside each host, all-reduce of each slice across hosts
// among the ranks that own it, all-gather inside each host; run the phases in this order
// (needs a uniform layout: every host the same number of ranks).
std::vector<std::unique_ptr<StepSource>> makeHierarchicalAllReduce(const CollArgs& a, const topo::RankLayout& l);
// hier_reduce_scatter.cc: a ring reduce-scatter inside each host of the blocks of every host's
// i-th rank (the host-reduced blocks land in `scratch`, one per host: count x hosts elements),
// then a ring reduce-scatter of those among the i-th ranks of all hosts. Uniform layouts.
std::vector<std::unique_ptr<StepSource>> makeHierarchicalReduceScatter(const CollArgs& a, const topo::RankLayout& l,
                                                                       char* scratch);
// hier_allgather.cc: a ring all-gather among the i-th ranks of all hosts, then a ring
// all-gather inside each host of what each rank gathered. Uniform layouts.
std::vector<std::unique_ptr<StepSource>> makeHierarchicalAllGather(const CollArgs& a, const topo::RankLayout& l);
std::unique_ptr<StepSource> makeRecursiveDoublingAllReduce(const CollArgs& a);
// binomial_tree_allreduce.cc: reduce into ring position 0 along a binomial tree, broadcast back.
std::unique_ptr<StepSource> makeBinomialTreeAllReduce(const CollArgs& a);
std::unique_ptr<StepSource> makeRingAllGather(const CollArgs& a);
std::unique_ptr<StepSource> makeRingReduceScatter(const CollArgs& a);
std::unique_ptr<StepSource> makeRingBroadcast(const CollArgs& a);
std::unique_ptr<StepSource> makeChainReduce(const CollArgs& a);
std::unique_ptr<StepSource> makeDirectBroadcast(const CollArgs& a);
std::unique_ptr<StepSource> makeDirectReduce(const CollArgs& a);
// The flat-tree all-reduce (the Tree's flat shape): every rank's input to ring position 0,
// which reduces them in position order and sends the result back to each.
std::unique_ptr<StepSource> makeDirectAllReduce(const CollArgs& a);
std::unique_ptr<StepSource> makeDirectGather(const CollArgs& a);
std::unique_ptr<StepSource> makeDirectScatter(const CollArgs& a);
// Rank-order (deterministic) reductions: sliced = each rank reduces its slice, bandwidth-bound
// sizes; gathered = every reducer receives whole buffers, one hop for small ones.
std::unique_ptr<StepSource> makeRankOrderAllReduce(const CollArgs& a);
std::unique_ptr<StepSource> makeRankOrderGatheredAllReduce(const CollArgs& a);
std::unique_ptr<StepSource> makeRankOrderReduce(const CollArgs& a);
std::unique_ptr<StepSource> makeRankOrderGatheredReduce(const CollArgs& a);
std::unique_ptr<StepSource> makeRankOrderReduceScatter(const CollArgs& a);
// shm_direct.cc: every rank reads all inputs from the board (needs Comm::board; count = per rank).
std::unique_ptr<StepSource> makeShmDirectAllReduce(const CollArgs& a);
std::unique_ptr<StepSource> makeShmDirectAllGather(const CollArgs& a);
// The same all-reduce with each rank folding only its slice of every input (medium sizes).
std::unique_ptr<StepSource> makeShmSlicedAllReduce(const CollArgs& a);
// The same all-gather, with every input read in place from its rank's buffer (Board::peersReadable).
std::unique_ptr<StepSource> makeShmReadAllGather(const CollArgs& a);

// A fixed list of steps (small plans).
class StepList final : public StepSource {
 public:
  void push(const Step& s) {
    if (steps_.empty()) steps_.reserve(4);  // small plans: one allocation, not one per doubling
    steps_.push_back(s);
  }
  bool next(Step* out) override {
    if (i_ == steps_.size()) return false;
    *out = steps_[i_++];
    return true;
  }

 private:
  std::vector<Step> steps_;
  size_t i_ = 0;
};

// Step constructors shared by the algorithms.
inline Step sendStep(const CollArgs& a, int peer, const char* src, size_t bytes) {
  Step s;
  s.kind = Step::Kind::Send;
  s.type = a.type;
  s.op = a.op;
  s.sendPeer = peer;
  s.src = src;
  s.bytes = bytes;
  return s;
}
inline Step recvStep(const CollArgs& a, int peer, char* dst, size_t bytes) {
  Step s;
  s.kind = Step::Kind::Recv;
  s.type = a.type;
  s.op = a.op;
  s.recvPeer = peer;
  s.dst = dst;
  s.bytes = bytes;
  return s;
}
inline Step recvReduceStep(const CollArgs& a, int peer, char* dst, const char* local, size_t bytes) {
  Step s = recvStep(a, peer, dst, bytes);
  s.kind = Step::Kind::RecvReduce;
  s.src = local;
  return s;
}
inline Step copyStep(const CollArgs& a, char* dst, const char* src, size_t bytes) {
  Step s;
  s.kind = Step::Kind::Copy;
  s.type = a.type;
  s.dst = dst;
  s.src = src;
  s.bytes = bytes;
  return s;
}
inline Step forwardStep(const CollArgs& a, Step::Kind kind, int from, int to, const char* local, char* dst,
                        size_t bytes) {
  Step s;
  s.kind = kind;
  s.type = a.type;
  s.op = a.op;
  s.recvPeer = from;
  s.sendPeer = to;
  s.src = local;
  s.dst = dst;
  s.bytes = bytes;
  return s;
}

// Splits `count` elements into n nearly equal slices (the first count % n get one more).
struct Slices {
  size_t count;
  int n;
  size_t start(int s) const { return (count / n) * s + (static_cast<size_t>(s) < count % n ? s : count % n); }
  size_t len(int s) const { return count / n + (static_cast<size_t>(s) < count % n ? 1 : 0); }
};

inline int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace accl
