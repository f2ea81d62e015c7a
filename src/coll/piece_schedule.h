// piece_schedule.h: the piece-major order every pipelined algorithm follows. Blocks are cut
// into pieces of at most pieceBytes; round r issues all `stepsPerRound` steps of piece r
// before any step of piece r+1, so at most about one piece per round is in flight on each
// link and a channel of a few pieces never deadlocks (see coll_simulation_test).
#pragma once
#include <algorithm>
#include "coll/algorithms.h"

namespace accl {

class PieceSchedule {
 public:
  // longestBlock: elements of the largest block the pieces are cut from.
  PieceSchedule(const CollArgs& a, size_t longestBlock, int stepsPerRound)
      : esize(dev::typeSize(a.type)), pieceElems(std::max<size_t>(1, a.pieceBytes / esize)),
        rounds_((longestBlock + pieceElems - 1) / pieceElems), stepsPerRound_(stepsPerRound) {}

  bool done() const { return round_ >= rounds_; }
  int step() const { return step_; }
  void advance() {
    if (++step_ == stepsPerRound_) {
      step_ = 0;
      round_++;
    }
  }
  // First element of the current piece, relative to its block.
  size_t pieceStart() const { return round_ * pieceElems; }
  // Bytes of the current piece of a block of `blockElems` elements (0 once it is used up).
  size_t pieceBytes(size_t blockElems) const {
    size_t lo = pieceStart();
    return lo >= blockElems ? 0 : std::min(pieceElems, blockElems - lo) * esize;
  }

  const size_t esize;
  const size_t pieceElems;

 private:
  size_t rounds_;
  int stepsPerRound_;
  size_t round_ = 0;
  int step_ = 0;
};

}  // namespace accl
