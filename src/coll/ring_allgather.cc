// Ring all-gather: block r-k arrives at step k and is forwarded; the own block is copied
// into place first (skipped when in-place).
#include <algorithm>
#include "coll/algorithms.h"

namespace accl {
namespace {

class RingAllGather final : public StepSource {
 public:
  explicit RingAllGather(const CollArgs& a)
      : a_(a), esize_(dev::typeSize(a.type)), pieceElems_(std::max<size_t>(1, a.pieceBytes / esize_)),
        rounds_((a.count + pieceElems_ - 1) / pieceElems_) {}

  bool next(Step* out) override {
    const int n = a_.nranks, r = a_.rank;
    const size_t blockBytes = a_.count * esize_;
    if (!copied_) {
      copied_ = true;
      *out = copyStep(a_, a_.dst + r * blockBytes, a_.src, blockBytes);
      return true;
    }
    if (round_ >= rounds_) return false;
    const int prev = mod(r - 1, n), next = mod(r + 1, n);
    const int k = idx_;
    const size_t lo = round_ * pieceElems_;
    const size_t bytes = std::min(pieceElems_, a_.count - lo) * esize_;
    auto block = [&](int b) { return a_.dst + b * blockBytes + lo * esize_; };
    if (k == 0) {
      *out = sendStep(a_, next, a_.src + lo * esize_, bytes);
    } else if (k < n - 1) {
      *out = forwardStep(a_, Step::Kind::RecvCopySend, prev, next, nullptr, block(mod(r - k, n)), bytes);
    } else {
      *out = recvStep(a_, prev, block(mod(r - k, n)), bytes);
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
  bool copied_ = false;
  size_t round_ = 0;
  int idx_ = 0;
};

}  // namespace

std::unique_ptr<StepSource> makeRingAllGather(const CollArgs& a) { return std::make_unique<RingAllGather>(a); }

}  // namespace accl
