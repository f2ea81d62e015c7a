// Ring reduce-scatter: block r-1-k travels at step k, so rank r finishes its own block r.
// Piece-major like the ring all-reduce (see there for why it cannot deadlock).
#include <algorithm>
#include "coll/algorithms.h"

namespace accl {
namespace {

class RingReduceScatter final : public StepSource {
 public:
  explicit RingReduceScatter(const CollArgs& a)
      : a_(a), esize_(dev::typeSize(a.type)), pieceElems_(std::max<size_t>(1, a.pieceBytes / esize_)),
        rounds_((a.count + pieceElems_ - 1) / pieceElems_) {}

  bool next(Step* out) override {
    const int n = a_.nranks, r = a_.rank;
    if (round_ >= rounds_) return false;
    const int prev = mod(r - 1, n), next = mod(r + 1, n);
    const int k = idx_;
    const size_t lo = round_ * pieceElems_;
    const size_t bytes = std::min(pieceElems_, a_.count - lo) * esize_;
    auto block = [&](int b) { return a_.src + (static_cast<size_t>(b) * a_.count + lo) * esize_; };
    if (k == 0) {
      *out = sendStep(a_, next, block(mod(r - 1, n)), bytes);
    } else if (k < n - 1) {
      *out = forwardStep(a_, Step::Kind::RecvReduceSend, prev, next, block(mod(r - 1 - k, n)), nullptr, bytes);
    } else {
      *out = recvReduceStep(a_, prev, a_.dst + lo * esize_, block(r), bytes);
    }
    if (++idx_ == n) {
      idx_ = 0;
      round_++;
    }
    return true;
  }

 private:
  CollArgs a_;
  size_t esize_;
  size_t pieceElems_;
  size_t rounds_;
  size_t round_ = 0;
  int idx_ = 0;
};

}  // namespace

std::unique_ptr<StepSource> makeRingReduceScatter(const CollArgs& a) {
  return std::make_unique<RingReduceScatter>(a);
}

}  // namespace accl
