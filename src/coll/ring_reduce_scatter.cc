// Ring reduce-scatter: at ring position p, the block of the rank at position p-1-k travels at
// step k, so every rank finishes its own block (CollArgs::rankAt: the ring order).
// Pipelined piece by piece (piece_schedule.h).
#include "coll/piece_schedule.h"

namespace accl {
namespace {

class RingReduceScatter final : public StepSource {
 public:
  explicit RingReduceScatter(const CollArgs& a) : a_(a), s_(a, a.count, a.nranks) {}

  bool next(Step* out) override {
    if (s_.done()) return false;
    const int n = a_.nranks, p = a_.pos(), r = a_.rank, k = s_.step();
    const int prev = a_.rankAt(p - 1), next = a_.rankAt(p + 1);
    const size_t bytes = s_.pieceBytes(a_.count);
    auto block = [&](int owner) {
      return a_.src + (static_cast<size_t>(a_.blockIdx(owner)) * a_.count + s_.pieceStart()) * s_.esize;
    };
    if (k == 0) {
      *out = sendStep(a_, next, block(a_.rankAt(p - 1)), bytes);
    } else if (k < n - 1) {
      *out = forwardStep(a_, Step::Kind::RecvReduceSend, prev, next, block(a_.rankAt(p - 1 - k)), nullptr, bytes);
    } else {
      *out = recvReduceStep(a_, prev, a_.dst + s_.pieceStart() * s_.esize, block(r), bytes);
    }
    s_.advance();
    return true;
  }

 private:
  CollArgs a_;
  PieceSchedule s_;
};

}  // namespace

std::unique_ptr<StepSource> makeRingReduceScatter(const CollArgs& a) {
  return std::make_unique<RingReduceScatter>(a);
}

}  // namespace accl
