// Ring all-gather: at ring position p, the block of the rank at position p-k arrives at step k
// and is forwarded; the own block is copied into place first. Pipelined piece by piece (piece_schedule.h).
#include "coll/piece_schedule.h"

namespace accl {
namespace {

class RingAllGather final : public StepSource {
 public:
  explicit RingAllGather(const CollArgs& a) : a_(a), s_(a, a.count, a.nranks) {}

  bool next(Step* out) override {
    const int n = a_.nranks, p = a_.pos(), k = s_.step();
    const size_t blockBytes = a_.count * s_.esize;
    if (!copied_) {
      copied_ = true;
      *out = copyStep(a_, a_.dst + a_.rank * blockBytes, a_.src, blockBytes);
      return true;
    }
    if (s_.done()) return false;
    const int prev = a_.rankAt(p - 1), next = a_.rankAt(p + 1);
    const size_t lo = s_.pieceStart() * s_.esize, bytes = s_.pieceBytes(a_.count);
    char* block = a_.dst + a_.rankAt(p - k) * blockBytes + lo;
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
