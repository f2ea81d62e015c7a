// Lane: runs a sequence of steps against the channels, one chunk at a time.
#include <algorithm>
#include <cstring>
#include "base/check.h"
#include "sched/work.h"

namespace accl {
namespace {

// Send steps at least this large lend their source to the transport rather than copy it into
// the channel: on sockets that is one user copy per byte less (send() copies into the kernel
// anyway). Smaller ones stay copies: a small commit is sent inline by the committing thread.
constexpr size_t kLendMinBytes = 64 << 10;

size_t roundDown(size_t n, size_t esize) { return n - n % esize; }

}  // namespace

bool padSendStream(SendChannel* ch) {
  size_t pad = (kStreamAlign - ch->position() % kStreamAlign) % kStreamAlign;
  if (pad) {
    void* buf;
    size_t avail;
    if (ch->acquire(&buf, &avail) != ncclSuccess || avail < pad) return false;
    ch->commitPadding(pad);  // the step's data follows: steps with no bytes are skipped
  }
  return true;
}

bool padRecvStream(RecvChannel* ch) {
  size_t pad = (kStreamAlign - ch->position() % kStreamAlign) % kStreamAlign;
  if (pad) {
    const void* buf;
    size_t avail;
    if (ch->peek(&buf, &avail) != ncclSuccess || avail < pad) return false;
    ch->release(pad);
  }
  return true;
}

bool Lane::alignSend(SendChannel* ch) {
  if (!sendAligned_) sendAligned_ = padSendStream(ch);
  return sendAligned_;
}

bool Lane::alignRecv(RecvChannel* ch) {
  if (!recvAligned_) recvAligned_ = padRecvStream(ch);
  return recvAligned_;
}

ncclResult_t Lane::stampPeers(Comm& comm, SendChannel* out, RecvChannel* in, bool* ready) {
  *ready = true;
  if (!gate_.stamp()) return ncclSuccess;
  if (in) {
    bool got = false;
    if (alignRecv(in)) {
      NCCLCHECK(gate_.recv(comm, in, cur_.recvPeer, &got));
    } else {
      const void* b;
      size_t a;
      NCCLCHECK(in->peek(&b, &a));  // surfaces a closed connection
    }
    *ready = got;
  }
  if (out) {
    bool sent = false;
    if (alignSend(out)) {
      NCCLCHECK(gate_.send(out, cur_.sendPeer, &sent));
    } else {
      void* b;
      size_t a;
      NCCLCHECK(out->acquire(&b, &a));
    }
    *ready = *ready && sent;
  }
  return ncclSuccess;
}

Lane::StepState Lane::settle(dev::Backend& backend, const InFlight& f) {
  waitRecv_ = waitSend_ = -1;
  if (f.fence.pending() && !backend.poll(f.fence)) {
    inFlight_ = f;
    inFlight_.active = true;
    return StepState::Blocked;
  }
  finish(f);
  return done_ == cur_.bytes ? StepState::Done : StepState::Moved;
}

void Lane::finish(const InFlight& f) {
  if (f.in) f.in->release(f.n);
  if (f.out) f.out->commit(f.n);
  done_ += f.n;
}

ncclResult_t Lane::runStep(Comm& comm, const dev::StreamRef& stream, StepState* state) {
  Step& s = cur_;
  if (s.kind == Step::Kind::BoardReduce || s.kind == Step::Kind::BoardGather) return runBoardStep(comm, state);
  if (s.kind == Step::Kind::BoardReadGather) return runBoardReadStep(comm, state);
  if (s.kind == Step::Kind::BoardSliceReduce) return runBoardSliceStep(comm, state);
  dev::Backend& be = *comm.backend;
  const size_t esize = dev::typeSize(s.type);
  const size_t remaining = s.bytes - done_;
  *state = StepState::Blocked;
  // Until the step moves, it waits on its peers; narrowed below where we know which side.
  waitRecv_ = s.recvPeer;
  waitSend_ = s.sendPeer;
  switch (s.kind) {
    case Step::Kind::Copy: {
      dev::Fence f;
      if (s.dst != s.src) f = be.copy(stream, s.dst, s.src, s.bytes, false);
      *state = settle(be, {false, f, nullptr, nullptr, remaining});
      return ncclSuccess;
    }
    case Step::Kind::Scale:
      *state = settle(be, {false, be.scale(stream, s.type, s.dst, s.src, s.scalar, s.bytes / esize), nullptr,
                           nullptr, remaining});
      return ncclSuccess;
    case Step::Kind::Divide:
      *state = settle(be, {false, be.divide(stream, s.type, s.dst, s.src, s.divisor, s.bytes / esize), nullptr,
                           nullptr, remaining});
      return ncclSuccess;
    case Step::Kind::Accumulate:
      *state = settle(be, {false, be.reduce2(stream, s.type, s.op, s.dst, s.dst, s.src, s.bytes / esize), nullptr,
                           nullptr, remaining});
      return ncclSuccess;
    case Step::Kind::Send: {
      PeerConnection* conn;
      NCCLCHECK(comm.connection(s.sendPeer, &conn));
      SendChannel* ch = conn->send();
      if (!alignSend(ch)) {
        void* b; size_t a;
        NCCLCHECK(ch->acquire(&b, &a));  // surfaces a closed connection
        return ncclSuccess;
      }
      bool stamped;
      NCCLCHECK(stampPeers(comm, ch, nullptr, &stamped));
      if (!stamped) return ncclSuccess;
      if (lentEnd_ != 0) {
        NCCLCHECK(ch->progress());  // surfaces a failed connection
        if (ch->handedOff() < lentEnd_) return ncclSuccess;
        lentEnd_ = 0;
        done_ = s.bytes;
        *state = StepState::Done;
        return ncclSuccess;
      }
      // The source is read until the step ends, and nothing writes it before then: later
      // steps (an in-place all-reduce's) come after, and the user waits for the operation.
      if (remaining >= kLendMinBytes && be.hostBuffers() && ch->lend(s.src + done_, remaining)) {
        lentEnd_ = ch->position();
        *state = StepState::Moved;
        return ncclSuccess;
      }
      void* buf;
      size_t avail;
      NCCLCHECK(ch->acquire(&buf, &avail));
      size_t n = roundDown(std::min(avail, remaining), esize);
      if (n == 0) return ncclSuccess;
      *state = settle(be, {false, be.copy(stream, buf, s.src + done_, n, false), nullptr, ch, n});
      return ncclSuccess;
    }
    case Step::Kind::Recv:
    case Step::Kind::RecvReduce: {
      PeerConnection* conn;
      NCCLCHECK(comm.connection(s.recvPeer, &conn));
      RecvChannel* ch = conn->recv();
      if (!alignRecv(ch)) {
        const void* b; size_t a;
        NCCLCHECK(ch->peek(&b, &a));
        return ncclSuccess;
      }
      bool stamped;
      NCCLCHECK(stampPeers(comm, nullptr, ch, &stamped));
      if (!stamped) return ncclSuccess;
      const void* buf;
      size_t avail;
      NCCLCHECK(ch->peek(&buf, &avail));
      size_t n = roundDown(std::min(avail, remaining), esize);
      if (n == 0) return ncclSuccess;
      dev::Fence f;
      if (s.kind == Step::Kind::Recv) {
        if (s.dst) f = be.copy(stream, s.dst + done_, buf, n, s.streamDst);
      } else {
        const void* local = s.src + done_;
        f = be.reduce2(stream, s.type, s.op, s.dst + done_, s.recvFirst ? buf : local, s.recvFirst ? local : buf,
                       n / esize);
      }
      *state = settle(be, {false, f, ch, nullptr, n});
      return ncclSuccess;
    }
    case Step::Kind::BoardReduce:
    case Step::Kind::BoardGather:
    case Step::Kind::BoardReadGather:
    case Step::Kind::BoardSliceReduce: break;  // runBoardStep, runBoardReadStep, runBoardSliceStep
    case Step::Kind::RecvReduceSend:
    case Step::Kind::RecvCopySend: {
      PeerConnection* inConn;
      PeerConnection* outConn;
      NCCLCHECK(comm.connection(s.recvPeer, &inConn));
      NCCLCHECK(comm.connection(s.sendPeer, &outConn));
      RecvChannel* in = inConn->recv();
      SendChannel* out = outConn->send();
      bool stamped;
      NCCLCHECK(stampPeers(comm, out, in, &stamped));
      if (!stamped) return ncclSuccess;
      if (s.kind == Step::Kind::RecvCopySend && s.dst && be.hostBuffers() && out->lends() &&
          (lentEnd_ != 0 || (done_ == 0 && s.bytes >= kLendMinBytes)))
        return runLentForward(be, stream, in, out, state);
      bool ready = alignRecv(in);
      ready = alignSend(out) && ready;
      const void* ibuf;
      size_t iavail;
      void* obuf;
      size_t oavail;
      NCCLCHECK(in->peek(&ibuf, &iavail));
      NCCLCHECK(out->acquire(&obuf, &oavail));
      if (iavail >= esize) waitRecv_ = -1;
      if (oavail >= esize) waitSend_ = -1;
      if (!ready) return ncclSuccess;
      size_t n = roundDown(std::min({iavail, oavail, remaining}), esize);
      if (n == 0) return ncclSuccess;
      // Both calls are queued on one stream, so the second's fence covers the first.
      dev::Fence f;
      if (s.kind == Step::Kind::RecvReduceSend) {
        f = be.reduce2(stream, s.type, s.op, obuf, s.src + done_, ibuf, n / esize);
        if (s.dst) f = be.copy(stream, s.dst + done_, obuf, n, s.streamDst);
      } else {
        f = be.copy(stream, obuf, ibuf, n, false);
        if (s.dst) f = be.copy(stream, s.dst + done_, ibuf, n, s.streamDst);
      }
      *state = settle(be, {false, f, in, out, n});
      return ncclSuccess;
    }
  }
  return ncclSuccess;
}

ncclResult_t Lane::runLentForward(dev::Backend& be, const dev::StreamRef& stream, RecvChannel* in, SendChannel* out,
                                  StepState* state) {
  const Step& s = cur_;
  const size_t esize = dev::typeSize(s.type);
  if (done_ == s.bytes) {
    // Everything is received and lent: dst may be reused once the transport has sent it.
    waitRecv_ = -1;
    NCCLCHECK(out->progress());
    if (out->handedOff() < lentEnd_) return ncclSuccess;
    waitSend_ = -1;
    lentEnd_ = 0;
    *state = StepState::Done;
    return ncclSuccess;
  }
  bool ready = alignRecv(in);
  ready = alignSend(out) && ready;
  const void* ibuf;
  size_t iavail;
  NCCLCHECK(in->peek(&ibuf, &iavail));
  NCCLCHECK(out->progress());
  if (iavail >= esize) waitRecv_ = -1;
  char* to = s.dst + done_;
  if (!ready || !out->lendable(to)) return ncclSuccess;  // the previous span is still going out
  waitSend_ = -1;
  const size_t n = roundDown(std::min(iavail, s.bytes - done_), esize);
  if (n == 0) return ncclSuccess;
  // Host memory (hostBuffers): the copy is done when it returns, before send() may read it.
  // Plain stores, not streaming ones: send() reads the bytes back right away.
  be.copy(stream, to, ibuf, n, false);
  in->release(n);
  out->lend(to, n);
  done_ += n;
  lentEnd_ = out->position();
  *state = StepState::Moved;
  return ncclSuccess;
}

ncclResult_t Lane::advance(Comm& comm, const dev::StreamRef& stream, bool* progressed) {
  if (comm.backend->failed()) return ncclUnhandledCudaError;  // its WARN named the call
  while (!finished_) {
    if (inFlight_.active) {
      if (!comm.backend->poll(inFlight_.fence)) break;
      inFlight_.active = false;
      finish(inFlight_);
      *progressed = true;
      if (done_ == cur_.bytes) hasCur_ = false;
      continue;
    }
    if (!hasCur_) {
      while (sourceIdx_ < sources_.size() && !sources_[sourceIdx_]->next(&cur_)) sourceIdx_++;
      if (sourceIdx_ == sources_.size()) {
        finished_ = true;
        *progressed = true;
        break;
      }
      if (cur_.bytes == 0) continue;  // both ends skip empty steps, so no padding either
      cur_.streamDst = cur_.streamDst || streamDst_[sourceIdx_];
      gate_.reset(stamps_[sourceIdx_]);
      hasCur_ = true;
      done_ = 0;
      sendAligned_ = recvAligned_ = false;
      lentEnd_ = 0;
      boardSeq_ = 0;
      boardNext_ = 0;
      boardRead_ = false;
      boardSliced_ = false;
      if (resumeSeq_ != 0 && (cur_.kind == Step::Kind::BoardReduce || cur_.kind == Step::Kind::BoardGather)) {
        boardSeq_ = resumeSeq_;
        boardNext_ = resumeNext_;
        resumeSeq_ = 0;
      }
    }
    StepState state;
    NCCLCHECK(runStep(comm, stream, &state));
    if (state == StepState::Blocked) break;
    *progressed = true;
    if (state == StepState::Done) hasCur_ = false;
  }
  return ncclSuccess;
}

}  // namespace accl
