// board.h: where ranks that share memory meet for small collectives (NCCL_ALGO "ShmDirect").
// Each rank owns two slots, used by alternate operations. A slot is a sequence number and the
// stamp of the call that posted it, with the rank's input right behind (the first 32 bytes
// share its cache line), so posting an
// input is one copy and one store, and every rank reads all inputs straight from the board:
// one synchronisation per operation instead of one per hop.
//
// Why two slots need no acknowledgement: a rank posts operation k only after it has read
// every rank's post of k-1, and a rank posts k-1 only after it finished reading the posts of
// k-2. So when a rank overwrites its slot k (= slot k-2), nobody can still be reading k-2.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>
#include "transports/call_stamp.h"
#include "transports/doorbell.h"

namespace accl {

struct BoardSlot {
  std::atomic<uint64_t> seq{0};  // the operation whose input the slot holds (0: none yet)
  // The call that posted it (call_stamp.h): readers check it is theirs before using the input.
  CallStamp stamp;
  char* data() { return reinterpret_cast<char*>(this) + sizeof(BoardSlot); }
};
static_assert(sizeof(BoardSlot) == 32 && std::atomic<uint64_t>::is_always_lock_free);

// Bytes one slot takes for `capacity` bytes of input: whole cache lines.
inline size_t boardSlotStride(size_t capacity) { return (sizeof(BoardSlot) + capacity + 63) & ~size_t(63); }

// What a BoardReadGather post holds instead of the input: where it lies in the poster's process.
struct BoardAddressPost {
  uint64_t addr;
  uint64_t bytes;
};

// The bytes [*begin, *end) of a `len`-byte chunk of `esize`-byte elements that `rank` of
// `nranks` reduces in a sliced all-reduce: equal slices, of whole cache lines once the chunk
// is big enough (so no two reducers write one line), the last ones shorter or empty.
inline void boardSlice(size_t len, size_t esize, int rank, int nranks, size_t* begin, size_t* end) {
  const size_t unit = len >= 64 * static_cast<size_t>(nranks) ? 64 : esize;
  const size_t per = ((len + nranks - 1) / nranks + unit - 1) / unit * unit;
  *begin = per * rank < len ? per * rank : len;
  *end = per * (rank + 1) < len ? per * (rank + 1) : len;
}

struct Board {
  size_t capacity = 0;               // input bytes every rank's slot holds; 0: no board
  std::vector<BoardSlot*> slots[2];  // [seq & 1][rank]
  std::vector<Doorbell*> bells;      // [rank]: rung after posting (null: nobody to wake)
  Doorbell* ownBell = nullptr;       // the one peers ring for this rank (the executor sleeps on it too)
  // [rank]: nonzero once that rank destroyed its communicator (1) or its communicator failed
  // (kBoardFailed): it will never post again; a rank waiting for its post fails instead of
  // hanging (ranks never connected see nothing else).
  std::vector<std::atomic<uint32_t>*> departed;
  uint64_t posted = 0;               // sequence number of this rank's latest post
  // In-place reads (BoardReadGather): a post holds where the input lies in the poster's
  // process, and peers copy it from there with process_vm_readv (one copy instead of a copy
  // into the board and one out of it). Only when every rank can read every other's memory.
  bool peersReadable = false;
  std::vector<int32_t> pids;                          // [rank]: its process
  std::vector<std::atomic<uint64_t>*> readDone;       // [rank]: the last post it finished reading
  // Sliced all-reduces (BoardSliceReduce): [rank]: the last operation whose reduced slice that
  // rank has written over its own input's slice in its slot (boardSlice() says which bytes).
  std::vector<std::atomic<uint64_t>*> sliced;
  bool available(size_t bytes) const { return capacity > 0 && bytes <= capacity; }
  bool hasDeparted(int rank) const {
    return rank < static_cast<int>(departed.size()) && departed[rank]->load(std::memory_order_acquire) != 0;
  }
  // Whether `rank` left because its communicator failed (kBoardFailed), not by ncclCommDestroy.
  bool hasFailed(int rank) const {
    return rank < static_cast<int>(departed.size()) && departed[rank]->load(std::memory_order_acquire) == kBoardFailed;
  }
  // Whether `rank` left by ncclCommAbort (kBoardAborted): a cause, like a destroy.
  bool hasAborted(int rank) const {
    return rank < static_cast<int>(departed.size()) && departed[rank]->load(std::memory_order_acquire) == kBoardAborted;
  }
  static constexpr uint32_t kBoardFailed = 2;
  static constexpr uint32_t kBoardAborted = 3;
  // ncclCommDestroy (why 1), ncclCommAbort (kBoardAborted), or the communicator failed
  // (kBoardFailed): tells every rank, and
  // wakes those asleep waiting for this rank's post.
  void depart(int myRank, uint32_t why = 1) {
    if (myRank >= static_cast<int>(departed.size())) return;  // no board (or one without flags)
    departed[myRank]->store(why, std::memory_order_release);
    for (Doorbell* bell : bells)
      if (bell) ringDoorbell(bell);
  }
};

}  // namespace accl
