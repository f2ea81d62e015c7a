// Lane::runBoardStep: the ShmDirect steps (transports/board.h). The step's bytes go through
// the board in chunks of its capacity; for each chunk the rank posts its piece once, then
// consumes every rank's post in rank order as each appears, so all ranks reduce in the same
// order and get bitwise identical results. Every chunk is one board operation (one sequence
// number), so the two-slot argument of board.h holds chunk by chunk.
#include <algorithm>
#include <cstring>
#include "base/check.h"
#include "sched/board_consume.h"
#include "sched/work.h"

namespace accl {

ncclResult_t Lane::checkBoardPeer(Comm& comm, int peer, const char* what, bool* recheck) {
  // A peer that died never posts: its closed connection (if made; Comm::fail closes them all)
  // ends the wait, else the executor's peer checks do.
  if (PeerConnection* conn = peer == comm.rank ? nullptr : comm.conns[peer].get()) {
    const void* buf;
    size_t avail;
    NCCLCHECK(conn->recv()->peek(&buf, &avail));
  }
  if (comm.board.hasFailed(peer)) {
    WARN("rank %d: ShmDirect: the communicator of %s failed (its log says why) while this rank waits for its %s",
         comm.rank, comm.describePeer(peer).c_str(), what);
    return ncclRemoteError;
  }
  if (comm.board.hasDeparted(peer)) {
    if (departedSeen_ != peer) {
      departedSeen_ = peer;
      *recheck = true;
      return ncclSuccess;
    }
    WARN("rank %d: ShmDirect: %s %s while this rank waits for its %s (it never made this call, or left it early)",
         comm.rank, comm.describePeer(peer).c_str(),
         comm.board.hasAborted(peer) ? "aborted its communicator (ncclCommAbort)"
                                     : "destroyed its communicator (ncclCommDestroy)",
         what);
    return ncclRemoteError;
  }
  return ncclSuccess;
}

ncclResult_t Lane::checkBoardStamp(Comm& comm, int peer, const CallStamp& theirs) {
  if (!gate_.stamp() || sameStamp(*gate_.stamp(), theirs)) return ncclSuccess;
  return failMismatch(comm, *gate_.stamp(), peer, theirs, "posted on the shared-memory board by");
}

ncclResult_t Lane::runBoardStep(Comm& comm, StepState* state) {
  const Step& s = cur_;
  Board& board = comm.board;
  const int n = comm.nranks;
  const size_t esize = dev::typeSize(s.type);
  *state = StepState::Blocked;
  waitSend_ = -1;
  size_t chunk;
  NCCLCHECK(boardChunkBytes(board, comm.rank, n, esize, false, &chunk));
  bool moved = false;
  while (done_ < s.bytes) {
    const size_t len = std::min(chunk, s.bytes - done_);
    if (boardSeq_ == 0) {
      boardSeq_ = postOnBoard(board, comm.rank, s.src + done_, len, gate_.stamp());
      boardNext_ = 0;
      moved = true;
    }
    BoardFold fold;
    fold.gather = s.kind == Step::Kind::BoardGather;
    fold.type = s.type;
    fold.op = s.op;
    fold.dst = s.dst + done_;
    fold.stride = s.bytes;
    fold.len = len;
    fold.stamp = gate_.stamp();
    const int before = boardNext_;
    int mismatch = -1;
    const bool all = consumeBoardPosts(board, boardSeq_, n, fold, &boardNext_, &mismatch);
    if (mismatch >= 0) return checkBoardStamp(comm, mismatch, board.slots[boardSeq_ & 1][mismatch]->stamp);
    moved = moved || boardNext_ != before;
    if (!all) {
      waitRecv_ = boardNext_;
      NCCLCHECK(checkBoardPeer(comm, boardNext_, "input", &moved));
      if (moved) *state = StepState::Moved;
      return ncclSuccess;
    }
    done_ += len;
    boardSeq_ = 0;  // the next chunk is a new board operation
  }
  waitRecv_ = -1;
  *state = StepState::Done;
  return ncclSuccess;
}

}  // namespace accl
