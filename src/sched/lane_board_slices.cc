// Lane::runBoardSliceStep: the sliced ShmDirect all-reduce (Step::Kind::BoardSliceReduce).
// For medium sizes, every rank folding every input (runBoardStep) does n times the work and
// reads n whole inputs; here each rank posts all of its input but its own slice
// (boardSlice()), folds that slice of every rank's input in rank order into the gap it left
// in its slot, copies the result to its output and publishes it (Board::sliced); then it
// copies the other ranks' reduced slices out of their slots. Each rank reads about 2 inputs'
// worth whatever n is, and the fold is the same ((x0 op x1) op x2 ... per element) as
// runBoardStep's, so results are bitwise identical.
//
// Why the two slots still need no acknowledgement: a rank finishes operation k only after
// every rank published its slice of k, which each does after it finished gathering k-1. So
// when a rank posts k+1 over the slot of k-1, nobody reads k-1 any more (board.h's argument,
// with "read every post" replaced by "published its slice"). A rank writes its result only
// into its own slot's gap, which no other rank folds from. Rank 0's slice is never empty, so
// some rank reads every post before anyone finishes the operation.
#include <algorithm>
#include <cstring>
#include "base/check.h"
#include "sched/board_consume.h"
#include "sched/work.h"

namespace accl {
namespace {

// Where in its slot operation `seq` puts a `len`-byte chunk: chunks smaller than the slot
// take turns through it. A rank rewriting lines that a peer has just read pays for pulling
// them back from the peer's cache (~10x a plain write here, shared/notes/host-shm-lessons.md
// lesson 2); lines read several operations ago have mostly left it.
size_t rotatedOffset(size_t capacity, size_t len, uint64_t seq) {
  const size_t stride = (len + 4095) & ~size_t(4095);
  const size_t turns = stride <= capacity ? capacity / stride : 1;
  return static_cast<size_t>((seq >> 1) % turns) * stride;
}

}  // namespace

ncclResult_t Lane::runBoardSliceStep(Comm& comm, StepState* state) {
  const Step& s = cur_;
  Board& board = comm.board;
  const int n = comm.nranks;
  const size_t esize = dev::typeSize(s.type);
  *state = StepState::Blocked;
  waitSend_ = -1;
  size_t chunk;
  NCCLCHECK(boardChunkBytes(board, comm.rank, n, esize, true, &chunk));
  bool moved = false;
  while (done_ < s.bytes) {
    const size_t len = std::min(chunk, s.bytes - done_);
    size_t begin, end;
    boardSlice(len, esize, comm.rank, n, &begin, &end);
    const char* src = s.src + done_;
    const uint64_t seq = boardSeq_ != 0 ? boardSeq_ : board.posted + 1;
    const size_t at = rotatedOffset(board.capacity, len, seq);
    char* mine = board.slots[seq & 1][comm.rank]->data() + at;
    if (boardSeq_ == 0) {
      // Post only what the others fold: this rank's own slice is read from src.
      std::memcpy(mine, src, begin);
      std::memcpy(mine + end, src + end, len - end);
      boardSeq_ = publishPost(board, comm.rank, gate_.stamp());
      boardNext_ = 0;
      boardSliced_ = false;
      moved = true;
    }
    BoardSlot* const* slots = board.slots[boardSeq_ & 1].data();
    if (!boardSliced_) {
      if (end > begin) {
        // Folded in rank order into this rank's slot (where its own slice was not posted),
        // then copied out: src is read at its turn even when it is also dst (in place).
        const size_t count = (end - begin) / esize;
        char* acc = mine + begin;
        for (; boardNext_ < n; boardNext_++) {
          const int r = boardNext_;
          const char* x = r == comm.rank ? src + begin : slots[r]->data() + at + begin;
          if (r != comm.rank && slots[r]->seq.load(std::memory_order_acquire) != boardSeq_) {
            waitRecv_ = r;
            NCCLCHECK(checkBoardPeer(comm, r, "input", &moved));
            if (moved) *state = StepState::Moved;
            return ncclSuccess;
          }
          if (r != comm.rank) NCCLCHECK(checkBoardStamp(comm, r, slots[r]->stamp));
          if (r == 0) continue;
          const char* x0 = comm.rank == 0 ? src + begin : slots[0]->data() + at + begin;  // checked at r = 0
          if (r == 1)
            dev::reduce2(s.type, s.op, acc, x0, x, count);
          else
            dev::reduce2(s.type, s.op, acc, acc, x, count);
          moved = true;
        }
        if (n == 1) std::memcpy(acc, src + begin, end - begin);
        std::memcpy(s.dst + done_ + begin, acc, end - begin);
      }
      board.sliced[comm.rank]->store(boardSeq_, std::memory_order_release);
      for (Doorbell* bell : board.bells)
        if (bell) ringDoorbell(bell);
      boardSliced_ = true;
      boardNext_ = 0;
      moved = true;
    }
    for (; boardNext_ < n; boardNext_++) {
      const int r = boardNext_;
      if (r == comm.rank) continue;
      // ">=": a rank whose slice of the next operation is empty publishes it without waiting
      // for any post, so it may already be one operation ahead.
      if (board.sliced[r]->load(std::memory_order_acquire) < boardSeq_) {
        waitRecv_ = r;
        NCCLCHECK(checkBoardPeer(comm, r, "reduced slice", &moved));
        if (moved) *state = StepState::Moved;
        return ncclSuccess;
      }
      NCCLCHECK(checkBoardStamp(comm, r, slots[r]->stamp));
      size_t from, to;
      boardSlice(len, esize, r, n, &from, &to);
      std::memcpy(s.dst + done_ + from, slots[r]->data() + at + from, to - from);
      moved = true;
    }
    done_ += len;
    boardSeq_ = 0;  // the next chunk is a new board operation
  }
  waitRecv_ = -1;
  *state = StepState::Done;
  return ncclSuccess;
}

}  // namespace accl
