// Ring all-reduce: reduce-scatter then all-gather around the ring, pipelined piece by piece
// (piece_schedule.h). Every slice is reduced by exactly one chain of ranks, so all ranks end
// bit-identical. Ranks follow the ring order (CollArgs::rankAt); slices are numbered by ring
// position, which every rank agrees on.
#include "coll/piece_schedule.h"

namespace accl {
namespace {

class RingAllReduce final : public StepSource {
 public:
  RingAllReduce(const CollArgs& a, RingPart part)
      : a_(a), part_(part), slices_{a.count, a.nranks},
        s_(a, slices_.len(0), part == RingPart::Whole ? 2 * a.nranks - 1 : a.nranks) {}

  bool next(Step* out) override {
    if (s_.done()) return false;
    const int n = a_.nranks, r = a_.pos();
    // The all-gather half starts where the whole ring's step n-1 sends the finished slice.
    const int k = part_ == RingPart::AllGather ? s_.step() + n - 1 : s_.step();
    const int prev = a_.rankAt(r - 1), next = a_.rankAt(r + 1);
    if (part_ == RingPart::AllGather && k == n - 1) {
      *out = sendStep(a_, next, dst(mod(r + 1, n)), bytes(mod(r + 1, n)));
    } else if (part_ == RingPart::ReduceScatter && k == n - 1) {  // slice r+1 is complete here
      int sl = mod(r + 1, n);
      *out = recvReduceStep(a_, prev, dst(sl), src(sl), bytes(sl));
    } else if (k == 0) {
      *out = sendStep(a_, next, src(r), bytes(r));
    } else if (k < n - 1) {  // reduce-scatter: add our share to slice r-k and pass it on
      int sl = mod(r - k, n);
      *out = forwardStep(a_, Step::Kind::RecvReduceSend, prev, next, src(sl), nullptr, bytes(sl));
    } else if (k == n - 1) {  // slice r+1 is complete here: keep it and start its all-gather
      int sl = mod(r + 1, n);
      *out = forwardStep(a_, Step::Kind::RecvReduceSend, prev, next, src(sl), dst(sl), bytes(sl));
    } else {  // all-gather step j = 1..n-1
      int j = k - n + 1, sl = mod(r + 1 - j, n);
      *out = j < n - 1 ? forwardStep(a_, Step::Kind::RecvCopySend, prev, next, nullptr, dst(sl), bytes(sl))
                       : recvStep(a_, prev, dst(sl), bytes(sl));
    }
    s_.advance();
    return true;
  }

 private:
  size_t offset(int sl) const { return (slices_.start(sl) + s_.pieceStart()) * s_.esize; }
  size_t bytes(int sl) const { return s_.pieceBytes(slices_.len(sl)); }
  const char* src(int sl) const { return a_.src + offset(sl); }
  char* dst(int sl) const { return a_.dst + offset(sl); }

  CollArgs a_;
  RingPart part_;
  Slices slices_;
  PieceSchedule s_;
};

}  // namespace

std::unique_ptr<StepSource> makeRingAllReduce(const CollArgs& a) {
  return std::make_unique<RingAllReduce>(a, RingPart::Whole);
}
std::unique_ptr<StepSource> makeRingAllReducePart(const CollArgs& a, RingPart part) {
  return std::make_unique<RingAllReduce>(a, part);
}

}  // namespace accl
