// Pipelined chain broadcast: root -> root+1 -> ... -> root-1, one piece at a time, each
// rank storing and forwarding in one pass (RecvCopySend).
#include <algorithm>
#include "coll/algorithms.h"

namespace accl {
namespace {

class RingBroadcast final : public StepSource {
 public:
  explicit RingBroadcast(const CollArgs& a)
      : a_(a), esize_(dev::typeSize(a.type)), pieceElems_(std::max<size_t>(1, a.pieceBytes / esize_)),
        rounds_((a.count + pieceElems_ - 1) / pieceElems_) {}

  bool next(Step* out) override {
    const int n = a_.nranks, r = a_.rank;
    const int pos = mod(r - a_.root, n);
    if (pos == 0 && !copied_) {
      copied_ = true;
      *out = copyStep(a_, a_.dst, a_.src, a_.count * esize_);
      return true;
    }
    if (round_ >= rounds_) return false;
    const size_t lo = round_ * pieceElems_;
    const size_t bytes = std::min(pieceElems_, a_.count - lo) * esize_;
    const int prev = mod(r - 1, n), next = mod(r + 1, n);
    if (pos == 0) {
      *out = sendStep(a_, next, a_.src + lo * esize_, bytes);
    } else if (pos < n - 1) {
      *out = forwardStep(a_, Step::Kind::RecvCopySend, prev, next, nullptr, a_.dst + lo * esize_, bytes);
    } else {
      *out = recvStep(a_, prev, a_.dst + lo * esize_, bytes);
    }
    round_++;
    return true;
  }

 private:
  CollArgs a_;
  size_t esize_;
  size_t pieceElems_;
  size_t rounds_;
  bool copied_ = false;
  size_t round_ = 0;
};

}  // namespace

std::unique_ptr<StepSource> makeRingBroadcast(const CollArgs& a) { return std::make_unique<RingBroadcast>(a); }

}  // namespace accl
