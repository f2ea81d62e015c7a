// Hierarchical all-gather (NCCL_ALGO=HierRing): on H hosts of L ranks each, (1) a ring
// all-gather among the i-th ranks of all hosts puts their H blocks in place in each one's
// output, then (2) a ring all-gather among each host's ranks passes those H blocks on, so
// every rank ends with all N. Inter-host steps: H-1 instead of the ring's N-1, and the host's
// L ranks (so its NICs) share its link bytes, (H-1) x L blocks, where the ring receives N-1
// blocks through one edge.
#include <algorithm>
#include "coll/algorithms.h"

namespace accl {
namespace {

// Phase 2: the ring of one host's ranks passes, for each piece and host g, the block of the
// rank at slot j of host g, as the flat ring all-gather passes the block of position j.
class HostAllGather final : public StepSource {
 public:
  HostAllGather(const CollArgs& local, const topo::RankLayout& l)
      : a_(local), l_(l), esize_(dev::typeSize(local.type)),
        // A round sends one piece of each host's block on each link: together at most one
        // ring piece, so a channel of a few pieces never deadlocks (piece_schedule.h).
        pieceElems_(std::max<size_t>(1, local.pieceBytes / esize_ / static_cast<size_t>(l.nhosts))),
        rounds_((local.count + pieceElems_ - 1) / pieceElems_) {}

  bool next(Step* out) override {
    if (round_ >= rounds_) return false;
    const int n = a_.nranks, q = a_.pos(), k = step_, g = host_;
    const size_t lo = round_ * pieceElems_;
    const size_t bytes = std::min(pieceElems_, a_.count - lo) * esize_;
    // The output block of the rank at slot j of host g.
    auto block = [&](int j) {
      return a_.dst + (static_cast<size_t>(l_.peers[mod(j, n)][g]) * a_.count + lo) * esize_;
    };
    const int prev = a_.rankAt(q - 1), next = a_.rankAt(q + 1);
    if (k == 0) {
      *out = sendStep(a_, next, block(q), bytes);
    } else if (k < n - 1) {
      *out = forwardStep(a_, Step::Kind::RecvCopySend, prev, next, nullptr, block(q - k), bytes);
    } else {
      *out = recvStep(a_, prev, block(q - k), bytes);
    }
    // Host-minor: the H blocks of a step go out back to back, so a small reduce-scatter
    // takes L-1 hops of latency, not H x (L-1).
    if (++host_ == l_.nhosts) {
      host_ = 0;
      if (++step_ == n) {
        step_ = 0;
        round_++;
      }
    }
    return true;
  }

 private:
  CollArgs a_;
  const topo::RankLayout& l_;
  size_t esize_, pieceElems_, rounds_;
  size_t round_ = 0;
  int step_ = 0, host_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<StepSource>> makeHierarchicalAllGather(const CollArgs& a, const topo::RankLayout& l) {
  std::vector<std::unique_ptr<StepSource>> phases;
  const int h = l.hostSlot[a.rank], i = l.slot[a.rank];
  CollArgs across = a;
  across.nranks = l.nhosts;
  across.ringRanks = l.peers[i].data();
  across.ringPos = l.hostSlot.data();
  CollArgs local = a;
  local.nranks = static_cast<int>(l.hostRanks[h].size());
  local.ringRanks = l.hostRanks[h].data();
  local.ringPos = l.slot.data();
  phases.push_back(makeRingAllGather(across));
  if (a.count > 0) phases.push_back(std::make_unique<HostAllGather>(local, l));
  return phases;
}

}  // namespace accl
