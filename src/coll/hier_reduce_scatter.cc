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

// Phase 1: the ring of one host's ranks passes, for each piece and host g, the partial sum of
// the block of the rank at slot j of host g, in the order of the flat ring reduce-scatter.
class HostReduceScatter final : public StepSource {
 public:
  HostReduceScatter(const CollArgs& local, const topo::RankLayout& l, char* out)
      : a_(local), l_(l), out_(out), esize_(dev::typeSize(local.type)),
        // A round sends one piece of each host's block on each link: together at most one
        // ring piece, so a channel of a few pieces never deadlocks (piece_schedule.h).
        pieceElems_(std::max<size_t>(1, local.pieceBytes / esize_ / static_cast<size_t>(l.nhosts))),
        rounds_((local.count + pieceElems_ - 1) / pieceElems_) {}

  bool next(Step* out) override {
    if (round_ >= rounds_) return false;
    const int n = a_.nranks, q = a_.pos(), k = step_, g = host_;
    const size_t lo = round_ * pieceElems_;
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
  char* out_;
  size_t esize_, pieceElems_, rounds_;
  size_t round_ = 0;
  int step_ = 0, host_ = 0;
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
