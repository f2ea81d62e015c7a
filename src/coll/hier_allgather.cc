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

// Phase 2: the ring of one host's ranks passes, for each piece of each host g's block, the block of the
// rank at slot j of host g, as the flat ring all-gather passes the block of position j.
class HostAllGather final : public StepSource {
 public:
  HostAllGather(const CollArgs& local, const topo::RankLayout& l)
      : a_(local), l_(l), esize_(dev::typeSize(local.type)),
        pieceElems_(std::max<size_t>(1, local.pieceBytes / esize_)),
        piecesPerBlock_((local.count + pieceElems_ - 1) / pieceElems_),
        units_(piecesPerBlock_ * static_cast<size_t>(l.nhosts)),
        // A round moves at most one ring piece on each link (so a channel of a few pieces never
        // deadlocks, piece_schedule.h): one piece of one block, or as many whole small blocks
        // as fit, so a small op takes one round of L-1 hops and a large one full pieces.
        unitsPerRound_(piecesPerBlock_ > 1 ? 1 : std::max<size_t>(1, pieceElems_ / std::max<size_t>(1, local.count))) {}

  bool next(Step* out) override {
    if (roundStart_ >= units_) return false;
    const size_t roundEnd = std::min(units_, roundStart_ + unitsPerRound_), unit = roundStart_ + inRound_;
    const int n = a_.nranks, q = a_.pos(), k = step_, g = static_cast<int>(unit / piecesPerBlock_);
    const size_t lo = (unit % piecesPerBlock_) * pieceElems_;
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
    // The blocks of a round go out back to back at each step.
    if (++inRound_ == roundEnd - roundStart_) {
      inRound_ = 0;
      if (++step_ == n) {
        step_ = 0;
        roundStart_ = roundEnd;
      }
    }
    return true;
  }

 private:
  CollArgs a_;
  const topo::RankLayout& l_;
  size_t esize_, pieceElems_, piecesPerBlock_, units_, unitsPerRound_;
  size_t roundStart_ = 0, inRound_ = 0;  // the round's first unit (block g, piece), and where in it
  int step_ = 0;
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
