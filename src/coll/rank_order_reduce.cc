// Rank-order reductions (ACCL_DETERMINISTIC): every element of the result is exactly
// ((x0 OP x1) OP x2) OP ... OP x(n-1), whatever the count, algorithm, piece size or transport.
// The one rank that reduces an element receives the n contributions and folds them in rank
// order into its accumulator; the other algorithms fold in ring or butterfly order, which
// changes with the rank and the message shape.
//
// Two shapes, both cut into pieces (pieceBytes) and run piece by piece:
//  * sliced (bandwidth): slice s of the buffer is owned by rank s. Each round a rank sends its
//    share of every other slice to that slice's owner, folds its own slice in rank order and,
//    for all-reduce, sends the result to every rank (for reduce, to the root). Every rank sends
//    and receives about 2(n-1)/n of the buffer, like the ring.
//  * gathered (latency): the whole buffer goes to every reducer (all ranks for all-reduce, the
//    root for reduce), which folds it in rank order: one hop.
// Per channel at most two pieces are ever unread (a rank cannot finish round k before every
// peer has sent its round-k share), so pieces of channel/4 never deadlock.
#include <algorithm>
#include <vector>
#include "coll/algorithms.h"

namespace accl {
namespace {

bool overlaps(const char* a, const char* b, size_t bytes) { return a < b + bytes && b < a + bytes; }

Step accumulateStep(const CollArgs& a, char* acc, const char* src, size_t bytes) {
  Step s = copyStep(a, acc, src, bytes);
  s.kind = Step::Kind::Accumulate;
  s.op = a.op;
  return s;
}

// Steps a round at a time; subclasses fill one round (piece) of steps.
class RoundSteps : public StepSource {
 public:
  RoundSteps(const CollArgs& a, size_t longestBlock)
      : a_(a), esize_(dev::typeSize(a.type)), pieceElems_(std::max<size_t>(1, a.pieceBytes / esize_)),
        rounds_((longestBlock + pieceElems_ - 1) / pieceElems_) {}

  bool next(Step* out) override {
    while (pos_ == steps_.size()) {
      if (round_ == rounds_) return false;
      steps_.clear();
      pos_ = 0;
      fillRound(round_++ * pieceElems_);
    }
    *out = steps_[pos_++];
    return true;
  }

 protected:
  // Appends the steps of the piece that starts `lo` elements into each block.
  virtual void fillRound(size_t lo) = 0;

  // Bytes of the piece at `lo` of a block of `blockElems` elements (0 once it is used up).
  size_t pieceBytes(size_t lo, size_t blockElems) const {
    return lo >= blockElems ? 0 : std::min(pieceElems_, blockElems - lo) * esize_;
  }
  void push(const Step& s) {
    if (s.bytes) steps_.push_back(s);  // the lane skips empty steps on both ends anyway
  }

  // acc = x0 OP x1 OP ... OP x(n-1), left to right: contributions of the peers are received
  // into / folded into acc in rank order, this rank's own (`own`) folded in at its turn. The
  // first fold takes one pass: rank 0 folds x1 straight onto its own input, rank 1 folds its
  // own input onto x0 as it arrives (received data as the left operand). Ranks >= 2 first
  // receive x0 into acc; when acc and own overlap (in place), own is saved to a scratch piece
  // before that.
  void foldInRankOrder(char* acc, const char* own, size_t bytes) {
    if (bytes == 0) return;
    const int r = a_.rank;
    if (r >= 2 && overlaps(acc, own, bytes)) {
      if (stash_.size() < bytes) stash_.resize(pieceElems_ * esize_);
      push(copyStep(a_, stash_.data(), own, bytes));
      own = stash_.data();
    }
    if (r == 0) {
      push(recvReduceStep(a_, 1, acc, own, bytes));
    } else if (r == 1) {
      Step s = recvReduceStep(a_, 0, acc, own, bytes);
      s.recvFirst = true;
      push(s);
    } else {
      push(recvStep(a_, 0, acc, bytes));
    }
    for (int q = r >= 2 ? 1 : 2; q < a_.nranks; q++)
      push(q == r ? accumulateStep(a_, acc, own, bytes) : recvReduceStep(a_, q, acc, acc, bytes));
  }

  // A piece-sized buffer of this rank's own (e.g. a non-root's partial result for reduce).
  char* scratch(size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(pieceElems_ * esize_);
    return scratch_.data();
  }

  const CollArgs a_;
  const size_t esize_;
  const size_t pieceElems_;

 private:
  size_t rounds_;
  size_t round_ = 0;
  std::vector<Step> steps_;
  size_t pos_ = 0;
  std::vector<char> stash_, scratch_;
};

enum class Shape { AllReduce, Reduce, ReduceScatter };

// Sliced: rank s owns slice s. For all-reduce and reduce the slices split `count` nearly
// evenly; for reduce-scatter slice s is input block s (count elements each) and the owner's
// output is its own block.
class SlicedRankOrder final : public RoundSteps {
 public:
  SlicedRankOrder(const CollArgs& a, Shape shape)
      : RoundSteps(a, shape == Shape::ReduceScatter ? a.count : Slices{a.count, a.nranks}.len(0)), shape_(shape),
        slices_{a.count, a.nranks} {}

 private:
  size_t start(int s) const { return shape_ == Shape::ReduceScatter ? s * a_.count : slices_.start(s); }
  size_t len(int s) const { return shape_ == Shape::ReduceScatter ? a_.count : slices_.len(s); }

  void fillRound(size_t lo) override {
    const int n = a_.nranks, r = a_.rank;
    auto bytes = [&](int s) { return pieceBytes(lo, len(s)); };
    auto in = [&](int s) { return a_.src + (start(s) + lo) * esize_; };
    auto out = [&](int s) { return a_.dst + (start(s) + lo) * esize_; };
    for (int i = 1; i < n; i++) {
      int p = (r + i) % n;
      push(sendStep(a_, p, in(p), bytes(p)));
    }
    char* acc = nullptr;
    switch (shape_) {
      case Shape::AllReduce: acc = out(r); break;
      case Shape::ReduceScatter: acc = a_.dst + lo * esize_; break;
      case Shape::Reduce: acc = r == a_.root ? out(r) : scratch(bytes(r)); break;
    }
    foldInRankOrder(acc, in(r), bytes(r));
    if (shape_ == Shape::AllReduce) {
      for (int i = 1; i < n; i++) push(sendStep(a_, (r + i) % n, acc, bytes(r)));
      for (int i = 1; i < n; i++) {
        int p = (r - i + n) % n;
        push(recvStep(a_, p, out(p), bytes(p)));
      }
    } else if (shape_ == Shape::Reduce) {
      if (r != a_.root) {
        push(sendStep(a_, a_.root, acc, bytes(r)));
      } else {
        for (int p = 0; p < n; p++)
          if (p != r) push(recvStep(a_, p, out(p), bytes(p)));
      }
    }
  }

  Shape shape_;
  Slices slices_;
};

// Gathered: every reducer receives every rank's whole piece and folds it in rank order.
class GatheredRankOrder final : public RoundSteps {
 public:
  GatheredRankOrder(const CollArgs& a, Shape shape) : RoundSteps(a, a.count), shape_(shape) {}

 private:
  void fillRound(size_t lo) override {
    const int n = a_.nranks, r = a_.rank;
    const size_t bytes = pieceBytes(lo, a_.count);
    const char* in = a_.src + lo * esize_;
    char* out = a_.dst + lo * esize_;
    if (shape_ == Shape::Reduce) {
      if (r != a_.root) {
        push(sendStep(a_, a_.root, in, bytes));
      } else {
        foldInRankOrder(out, in, bytes);
      }
      return;
    }
    for (int i = 1; i < n; i++) push(sendStep(a_, (r + i) % n, in, bytes));
    foldInRankOrder(out, in, bytes);
  }

  Shape shape_;
};

}  // namespace

std::unique_ptr<StepSource> makeRankOrderAllReduce(const CollArgs& a) {
  return std::make_unique<SlicedRankOrder>(a, Shape::AllReduce);
}
std::unique_ptr<StepSource> makeRankOrderGatheredAllReduce(const CollArgs& a) {
  return std::make_unique<GatheredRankOrder>(a, Shape::AllReduce);
}
std::unique_ptr<StepSource> makeRankOrderReduce(const CollArgs& a) {
  return std::make_unique<SlicedRankOrder>(a, Shape::Reduce);
}
std::unique_ptr<StepSource> makeRankOrderGatheredReduce(const CollArgs& a) {
  return std::make_unique<GatheredRankOrder>(a, Shape::Reduce);
}
std::unique_ptr<StepSource> makeRankOrderReduceScatter(const CollArgs& a) {
  return std::make_unique<SlicedRankOrder>(a, Shape::ReduceScatter);
}

}  // namespace accl
