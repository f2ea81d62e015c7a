// Hierarchical reduce-scatter (NCCL_ALGO=HierRing): on H hosts of L ranks each, (1) a ring
// reduce-scatter among each host's ranks, in which the i-th rank of the host collects the
// host's sum of the blocks of every host's i-th rank (H blocks, kept in scratch), then (2) a
// ring reduce-scatter of those H blocks among the i-th ranks of all hosts. Inter-host steps:
// H-1 instead of the ring's N-1, and the host's L ranks (so its NICs) share its link bytes,
// (H-1) x L blocks, where the ring sends (N-1) blocks through one edge. Each block is reduced
// by one chain of ranks, as in the ring.
#include <algorithm>
#include "coll/algorithms.h"

namespace accl {
namespace {

// Phase 1: the ring of one host's ranks passes, for each piece of each host g's block, the partial sum of
// the block of the rank at slot j of host g, in the order of the flat ring reduce-scatter.
class HostReduceScatter final : public StepSource {
 public:
  HostReduceScatter(const CollArgs& local, const topo::RankLayout& l, char* out)
      : a_(local), l_(l), out_(out), esize_(dev::typeSize(local.type)),
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
    // The input block of the rank at slot j of host g.
    auto block = [&](int j) {
      return a_.src + (static_cast<size_t>(l_.peers[mod(j, n)][g]) * a_.count + lo) * esize_;
    };
    const int prev = a_.rankAt(q - 1), next = a_.rankAt(q + 1);
    if (k == 0) {
      *out = sendStep(a_, next, block(q - 1), bytes);
    } else if (k < n - 1) {
      *out = forwardStep(a_, Step::Kind::RecvReduceSend, prev, next, block(q - 1 - k), nullptr, bytes);
    } else {
      *out = recvReduceStep(a_, prev, out_ + (static_cast<size_t>(g) * a_.count + lo) * esize_, block(q), bytes);
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
  char* out_;
  size_t esize_, pieceElems_, piecesPerBlock_, units_, unitsPerRound_;
  size_t roundStart_ = 0, inRound_ = 0;  // the round's first unit (block g, piece), and where in it
  int step_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<StepSource>> makeHierarchicalReduceScatter(const CollArgs& a, const topo::RankLayout& l,
                                                                       char* scratch) {
  std::vector<std::unique_ptr<StepSource>> phases;
  const int h = l.hostSlot[a.rank], i = l.slot[a.rank];
  CollArgs local = a;
  local.nranks = static_cast<int>(l.hostRanks[h].size());
  local.ringRanks = l.hostRanks[h].data();
  local.ringPos = l.slot.data();
  CollArgs across = a;
  across.nranks = l.nhosts;
  across.ringRanks = l.peers[i].data();
  across.ringPos = l.hostSlot.data();
  across.blockOf = l.hostSlot.data();  // scratch holds host g's block at g
  across.src = scratch;
  if (a.count == 0) return phases;
  phases.push_back(std::make_unique<HostReduceScatter>(local, l, scratch));
  phases.push_back(makeRingReduceScatter(across));
  return phases;
}

}  // namespace accl
