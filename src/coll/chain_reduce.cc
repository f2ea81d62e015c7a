// Pipelined chain reduce along the ring order: the rank after the root starts, the root ends
// the chain, each rank adding its input to the running partial as it passes (RecvReduceSend);
// the root writes the result.
#include "coll/piece_schedule.h"

namespace accl {
namespace {

class ChainReduce final : public StepSource {
 public:
  explicit ChainReduce(const CollArgs& a) : a_(a), s_(a, a.count, 1) {}

  bool next(Step* out) override {
    if (s_.done()) return false;
    const int n = a_.nranks, r = a_.pos();
    const int pos = mod(r - a_.posOf(a_.root) - 1, n);  // root+1 starts the chain, root ends it
    const size_t lo = s_.pieceStart() * s_.esize, bytes = s_.pieceBytes(a_.count);
    const int prev = a_.rankAt(r - 1), next = a_.rankAt(r + 1);
    if (pos == 0) {
      *out = sendStep(a_, next, a_.src + lo, bytes);
    } else if (pos < n - 1) {
      *out = forwardStep(a_, Step::Kind::RecvReduceSend, prev, next, a_.src + lo, nullptr, bytes);
    } else {
      *out = recvReduceStep(a_, prev, a_.dst + lo, a_.src + lo, bytes);
    }
    s_.advance();
    return true;
  }

 private:
  CollArgs a_;
  PieceSchedule s_;
};

}  // namespace

std::unique_ptr<StepSource> makeChainReduce(const CollArgs& a) { return std::make_unique<ChainReduce>(a); }

}  // namespace accl
