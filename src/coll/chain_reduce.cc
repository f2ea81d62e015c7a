// Pipelined chain reduce: root+1 -> root+2 -> ... -> root, each rank adding its input to
// the running partial as it passes (RecvReduceSend); the root writes the result.
#include <algorithm>
#include "coll/algorithms.h"

namespace accl {
namespace {

class ChainReduce final : public StepSource {
 public:
  explicit ChainReduce(const CollArgs& a)
      : a_(a), esize_(dev::typeSize(a.type)), pieceElems_(std::max<size_t>(1, a.pieceBytes / esize_)),
        rounds_((a.count + pieceElems_ - 1) / pieceElems_) {}

  bool next(Step* out) override {
    const int n = a_.nranks, r = a_.rank;
    if (round_ >= rounds_) return false;
    const int pos = mod(r - a_.root - 1, n);  // root+1 starts the chain, root ends it
    const size_t lo = round_ * pieceElems_;
    const size_t bytes = std::min(pieceElems_, a_.count - lo) * esize_;
    const int prev = mod(r - 1, n), next = mod(r + 1, n);
    if (pos == 0) {
      *out = sendStep(a_, next, a_.src + lo * esize_, bytes);
    } else if (pos < n - 1) {
      *out = forwardStep(a_, Step::Kind::RecvReduceSend, prev, next, a_.src + lo * esize_, nullptr, bytes);
    } else {
      *out = recvReduceStep(a_, prev, a_.dst + lo * esize_, a_.src + lo * esize_, bytes);
    }
    round_++;
    return true;
  }

 private:
  CollArgs a_;
  size_t esize_;
  size_t pieceElems_;
  size_t rounds_;
  size_t round_ = 0;
};

}  // namespace

std::unique_ptr<StepSource> makeChainReduce(const CollArgs& a) { return std::make_unique<ChainReduce>(a); }

}  // namespace accl
