// Ring all-reduce: reduce-scatter then all-gather around the ring, pipelined in pieces.
// Steps are issued piece-major (all 2n-1 steps of piece c, then piece c+1), so at most one
// piece per round is in flight on each link and a channel of two pieces never deadlocks.
// Every slice is reduced by exactly one chain of ranks, so all ranks end bit-identical.
#include <algorithm>
#include "coll/algorithms.h"

namespace accl {
namespace {

class RingAllReduce final : public StepSource {
 public:
  explicit RingAllReduce(const CollArgs& a)
      : a_(a), esize_(dev::typeSize(a.type)), slices_{a.count, a.nranks},
        pieceElems_(std::max<size_t>(1, a.pieceBytes / esize_)),
        rounds_((slices_.len(0) + pieceElems_ - 1) / pieceElems_) {}

  bool next(Step* out) override {
    const int n = a_.nranks, r = a_.rank;
    if (round_ >= rounds_) return false;
    const int prev = mod(r - 1, n), next = mod(r + 1, n);
    const int k = idx_;
    if (k == 0) {
      *out = sendStep(a_, next, src(r), bytes(r));
    } else if (k < n - 1) {
      *out = forwardStep(a_, Step::Kind::RecvReduceSend, prev, next, src(mod(r - k, n)), nullptr, bytes(mod(r - k, n)));
    } else if (k == n - 1) {
      int s = mod(r + 1, n);  // this rank completes slice r+1 and starts its all-gather
      *out = forwardStep(a_, Step::Kind::RecvReduceSend, prev, next, src(s), dst(s), bytes(s));
    } else {
      int j = k - n + 1;  // all-gather step 1..n-1
      int s = mod(r + 1 - j, n);
      if (j < n - 1) {
        *out = forwardStep(a_, Step::Kind::RecvCopySend, prev, next, nullptr, dst(s), bytes(s));
      } else {
        *out = recvStep(a_, prev, dst(s), bytes(s));
      }
    }
    if (++idx_ == 2 * n - 1) {
      idx_ = 0;
      round_++;
    }
    return true;
  }

 private:
  size_t pieceStart(int s) const { return slices_.start(s) + round_ * pieceElems_; }
  size_t bytes(int s) const {
    size_t lo = round_ * pieceElems_, len = slices_.len(s);
    return lo >= len ? 0 : std::min(pieceElems_, len - lo) * esize_;
  }
  const char* src(int s) const { return a_.src + pieceStart(s) * esize_; }
  char* dst(int s) const { return a_.dst + pieceStart(s) * esize_; }

  CollArgs a_;
  size_t esize_;
  Slices slices_;
  size_t pieceElems_;
  size_t rounds_;
  size_t round_ = 0;
  int idx_ = 0;
};

}  // namespace

std::unique_ptr<StepSource> makeRingAllReduce(const CollArgs& a) { return std::make_unique<RingAllReduce>(a); }

}  // namespace accl
