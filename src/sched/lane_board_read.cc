// Lane::runBoardReadStep: the ShmDirect all-gather that reads inputs where they lie
// (Step::Kind::BoardReadGather). A rank posts the address of its input on the board (not the
// input), copies its own block, then copies every peer's input straight from the peer's
// process into its output (process_vm_readv; memcpy when the peer is a thread of this
// process). Each input is copied once per reader, where the board path copies it into the
// board and out again, and no rank ever writes memory another rank reads, so no cache line
// goes back and forth (host-shm-lessons.md, lesson 2).
//
// The input must stay untouched until every peer has read it, so a rank publishes "read up
// to post k" (Board::readDone) and finishes only when every peer has published k: two
// synchronisations per operation. One post per operation whatever its size, so the two-slot
// argument of board.h holds as for the other board steps.
#include <sys/uio.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include "base/check.h"
#include "sched/work.h"

namespace accl {
namespace {

// Copies `bytes` from address `from` of process `pid` into `to`.
ncclResult_t readPeer(const Comm& comm, int peer, int32_t pid, uint64_t from, char* to, size_t bytes) {
  if (pid == static_cast<int32_t>(getpid())) {  // a thread of this process (ncclCommInitAll, threads)
    std::memcpy(to, reinterpret_cast<const void*>(from), bytes);
    return ncclSuccess;
  }
  size_t done = 0;
  while (done < bytes) {
    iovec local{to + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(from + done), bytes - done};
    ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got <= 0) {
      WARN("rank %d: ShmDirect: cannot read %s's input in place (process_vm_readv of %zu bytes: %s)", comm.rank,
           comm.describePeer(peer).c_str(), bytes - done, got == 0 ? "nothing read" : strerror(errno));
      return errno == ESRCH ? ncclRemoteError : ncclSystemError;
    }
    done += static_cast<size_t>(got);
  }
  return ncclSuccess;
}

void ringAll(Board& board) {
  for (Doorbell* bell : board.bells)
    if (bell) ringDoorbell(bell);
}

}  // namespace

ncclResult_t Lane::runBoardReadStep(Comm& comm, StepState* state) {
  const Step& s = cur_;
  Board& board = comm.board;
  const int n = comm.nranks;
  *state = StepState::Blocked;
  waitSend_ = -1;
  if (!board.peersReadable || static_cast<int>(board.slots[0].size()) != n ||
      static_cast<int>(board.pids.size()) != n) {
    WARN("rank %d: ShmDirect in-place read without a board that allows it", comm.rank);
    return ncclInternalError;
  }
  bool moved = false;
  if (boardSeq_ == 0) {
    boardSeq_ = ++board.posted;
    BoardSlot* mine = board.slots[boardSeq_ & 1][comm.rank];
    const BoardAddressPost post{reinterpret_cast<uint64_t>(s.src), s.bytes};
    std::memcpy(mine->data(), &post, sizeof(post));
    mine->stamp = gate_.stamp() ? *gate_.stamp() : CallStamp{};
    mine->seq.store(boardSeq_, std::memory_order_release);
    ringAll(board);
    char* own = s.dst + comm.rank * s.bytes;
    if (own != s.src) std::memcpy(own, s.src, s.bytes);  // while the peers post theirs
    boardNext_ = 1;  // peers in the order rank+1, rank+2, ...: readers of one input are staggered
    moved = true;
  }
  while (boardNext_ < n) {
    const int peer = (comm.rank + boardNext_) % n;
    BoardSlot* slot = board.slots[boardSeq_ & 1][peer];
    if (slot->seq.load(std::memory_order_acquire) != boardSeq_) {
      waitRecv_ = peer;
      NCCLCHECK(checkBoardPeer(comm, peer, "input", &moved));
      if (moved) *state = StepState::Moved;
      return ncclSuccess;
    }
    NCCLCHECK(checkBoardStamp(comm, peer, slot->stamp));
    BoardAddressPost post;
    std::memcpy(&post, slot->data(), sizeof(post));
    if (post.bytes != s.bytes) {
      WARN("rank %d: ShmDirect: %s's all-gather input is %llu bytes, this rank's is %zu (mismatched calls)",
           comm.rank, comm.describePeer(peer).c_str(), static_cast<unsigned long long>(post.bytes), s.bytes);
      return ncclInvalidUsage;
    }
    NCCLCHECK(readPeer(comm, peer, board.pids[peer], post.addr, s.dst + peer * s.bytes, s.bytes));
    boardNext_++;
    moved = true;
  }
  if (!boardRead_) {
    board.readDone[comm.rank]->store(boardSeq_, std::memory_order_release);
    ringAll(board);
    boardRead_ = true;
    moved = true;
  }
  // Our input may be reused by the caller once we return: wait until every peer has read it.
  for (int peer = 0; peer < n; peer++) {
    if (peer == comm.rank || board.readDone[peer]->load(std::memory_order_acquire) >= boardSeq_) continue;
    waitRecv_ = peer;
    NCCLCHECK(checkBoardPeer(comm, peer, "read of this rank's input", &moved));
    if (moved) *state = StepState::Moved;
    return ncclSuccess;
  }
  waitRecv_ = -1;
  done_ = s.bytes;
  *state = StepState::Done;
  return ncclSuccess;
}

}  // namespace accl
