// Ring all-gather: block r-k arrives at step k and is forwarded; the own block is copied into
// place first (skipped when in-place). Pipelined piece by piece (piece_schedule.h).
#include "coll/piece_schedule.h"

namespace accl {
namespace {

class RingAllGather final : public StepSource {
 public:
  explicit RingAllGather(const CollArgs& a) : a_(a), s_(a, a.count, a.nranks) {}

  bool next(Step* out) override {
    const int n = a_.nranks, r = a_.rank, k = s_.step();
    const size_t blockBytes = a_.count * s_.esize;
    if (!copied_) {
      copied_ = true;
      *out = copyStep(a_, a_.dst + r * blockBytes, a_.src, blockBytes);
      return true;
    }
    if (s_.done()) return false;
    const int prev = mod(r - 1, n), next = mod(r + 1, n);
    const size_t lo = s_.pieceStart() * s_.esize, bytes = s_.pieceBytes(a_.count);
    char* block = a_.dst + mod(r - k, n) * blockBytes + lo;
    if (k == 0) {
      *out = sendStep(a_, next, a_.src + lo, bytes);
    } else if (k < n - 1) {
      *out = forwardStep(a_, Step::Kind::RecvCopySend, prev, next, nullptr, block, bytes);
    } else {
      *out = recvStep(a_, prev, block, bytes);
    }
    s_.advance();
    return true;
  }

 private:
  CollArgs a_;
  PieceSchedule s_;
  bool copied_ = false;
};

}  // namespace

std::unique_ptr<StepSource> makeRingAllGather(const CollArgs& a) { return std::make_unique<RingAllGather>(a); }

}  // namespace accl
