// Pipelined chain broadcast along the ring order: root -> next -> ... -> the rank before the
// root, one piece at a time, each rank storing and forwarding in one pass (RecvCopySend).
#include "coll/piece_schedule.h"

namespace accl {
namespace {

class RingBroadcast final : public StepSource {
 public:
  explicit RingBroadcast(const CollArgs& a) : a_(a), s_(a, a.count, 1) {}

  bool next(Step* out) override {
    const int n = a_.nranks, r = a_.pos();
    const int pos = mod(r - a_.posOf(a_.root), n);
    if (pos == 0 && !copied_) {
      copied_ = true;
      *out = copyStep(a_, a_.dst, a_.src, a_.count * s_.esize);
      return true;
    }
    if (s_.done()) return false;
    const size_t lo = s_.pieceStart() * s_.esize, bytes = s_.pieceBytes(a_.count);
    const int prev = a_.rankAt(r - 1), next = a_.rankAt(r + 1);
    if (pos == 0) {
      *out = sendStep(a_, next, a_.src + lo, bytes);
    } else if (pos < n - 1) {
      *out = forwardStep(a_, Step::Kind::RecvCopySend, prev, next, nullptr, a_.dst + lo, bytes);
    } else {
      *out = recvStep(a_, prev, a_.dst + lo, bytes);
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

std::unique_ptr<StepSource> makeRingBroadcast(const CollArgs& a) { return std::make_unique<RingBroadcast>(a); }

}  // namespace accl
