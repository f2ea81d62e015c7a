// board_consume.h: taking every rank's post of one ShmDirect board operation (transports/
// board.h), shared by the executor's board steps (lane_board.cc) and the direct path that
// runs small calls without the executor (board_fast_path.cc). Both must fold the posts the
// same way, in rank order, so all ranks get bitwise identical results, and so that an
// operation begun on the direct path can be finished by the executor.
#pragma once
#include <cstring>
#include "base/check.h"
#include "device.h"
#include "transports/board.h"

namespace accl {

// The bytes of each board operation of a step of `esize`-byte elements (the same on every
// rank); an internal error when this communicator's board cannot hold the step.
inline ncclResult_t boardChunkBytes(const Board& board, int rank, int nranks, size_t esize, bool sliced,
                                    size_t* chunk) {
  if (board.capacity < esize || static_cast<int>(board.slots[0].size()) != nranks ||
      (sliced && static_cast<int>(board.sliced.size()) != nranks)) {
    WARN("rank %d: ShmDirect step without a board that can hold it (capacity %zu, %zu ranks%s)", rank,
         board.capacity, board.slots[0].size(), sliced ? ", sliced" : "");
    return ncclInternalError;
  }
  *chunk = board.capacity - board.capacity % esize;
  return ncclSuccess;
}

struct BoardFold {
  bool gather = false;  // all-gather: rank r's piece goes to dst + r * stride; else folded into dst
  ncclDataType_t type = ncclFloat32;
  dev::RedKind op = dev::RedKind::Sum;
  char* dst = nullptr;  // where this chunk's result goes (for gathers: rank 0's piece)
  size_t stride = 0;    // gathers: bytes between two ranks' pieces in dst
  size_t len = 0;       // bytes of this chunk each rank posted
  const CallStamp* stamp = nullptr;  // this rank's call: every post must carry the same (null: unchecked)
};

// Consumes the posts of board operation `seq` from rank *next on, in rank order, as long as
// they are there. Returns true once every rank's post has been taken. A post of another call
// than f.stamp's stops it before that post is used: *mismatch is set to its rank (and *next).
inline bool consumeBoardPosts(Board& board, uint64_t seq, int nranks, const BoardFold& f, int* next,
                              int* mismatch = nullptr) {
  BoardSlot* const* slots = board.slots[seq & 1].data();
  const size_t esize = dev::typeSize(f.type);
  for (int r = *next; r < nranks; r++) {
    BoardSlot* slot = slots[r];
    if (slot->seq.load(std::memory_order_acquire) != seq) {
      *next = r;
      return false;
    }
    if (f.stamp && !sameStamp(slot->stamp, *f.stamp)) {
      *next = r;
      if (mismatch) *mismatch = r;
      return false;
    }
    if (f.gather) {
      std::memcpy(f.dst + r * f.stride, slot->data(), f.len);
    } else if (r == 1) {
      dev::reduce2(f.type, f.op, f.dst, slots[0]->data(), slot->data(), f.len / esize);
    } else if (r > 1) {
      dev::reduce2(f.type, f.op, f.dst, f.dst, slot->data(), f.len / esize);
    }
  }
  *next = nranks;
  return true;
}

// Publishes what this rank wrote into its slot of board operation board.posted + 1 as that
// operation (returned), stamped with its call, and wakes whoever sleeps on the board.
inline uint64_t publishPost(Board& board, int rank, const CallStamp* stamp) {
  const uint64_t seq = ++board.posted;
  board.slots[seq & 1][rank]->stamp = stamp ? *stamp : CallStamp{};
  board.slots[seq & 1][rank]->seq.store(seq, std::memory_order_release);
  for (Doorbell* bell : board.bells)
    if (bell) ringDoorbell(bell);
  return seq;
}

// Posts this rank's `len` bytes from `src` as board operation ++board.posted (returned) and
// wakes whoever sleeps on the board.
inline uint64_t postOnBoard(Board& board, int rank, const void* src, size_t len, const CallStamp* stamp) {
  std::memcpy(board.slots[(board.posted + 1) & 1][rank]->data(), src, len);
  return publishPost(board, rank, stamp);
}

}  // namespace accl
