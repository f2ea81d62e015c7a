// Lane: runs a sequence of steps against the channels, one chunk at a time.
#include <algorithm>
#include <cstring>
#include "base/check.h"
#include "sched/work.h"

namespace accl {
namespace {

// Every step starts its bytes at a 16-byte boundary of the stream so that received data can
// be reduced in place with aligned element access. Both ends pad identically.
constexpr uint64_t kStreamAlign = 16;

size_t roundDown(size_t n, size_t esize) { return n - n % esize; }

}  // namespace

bool Lane::alignSend(SendChannel* ch) {
  if (sendAligned_) return true;
  size_t pad = (kStreamAlign - ch->position() % kStreamAlign) % kStreamAlign;
  if (pad) {
    void* buf;
    size_t avail;
    if (ch->acquire(&buf, &avail) != ncclSuccess || avail < pad) return false;
    ch->commit(pad);
  }
  sendAligned_ = true;
  return true;
}

bool Lane::alignRecv(RecvChannel* ch) {
  if (recvAligned_) return true;
  size_t pad = (kStreamAlign - ch->position() % kStreamAlign) % kStreamAlign;
  if (pad) {
    const void* buf;
    size_t avail;
    if (ch->peek(&buf, &avail) != ncclSuccess || avail < pad) return false;
    ch->release(pad);
  }
  recvAligned_ = true;
  return true;
}

ncclResult_t Lane::runStep(Comm& comm, StepState* state) {
  Step& s = cur_;
  const size_t esize = dev::typeSize(s.type);
  const size_t remaining = s.bytes - done_;
  *state = StepState::Blocked;
  // Until the step moves, it waits on its peers; narrowed below where we know which side.
  waitRecv_ = s.recvPeer;
  waitSend_ = s.sendPeer;
  switch (s.kind) {
    case Step::Kind::Copy:
      if (s.dst != s.src) dev::copy(s.dst, s.src, s.bytes);
      done_ = s.bytes;
      break;
    case Step::Kind::Scale:
      dev::scale(s.type, s.dst, s.src, s.scalar, s.bytes / esize);
      done_ = s.bytes;
      break;
    case Step::Kind::Divide:
      dev::divide(s.type, s.dst, s.src, s.divisor, s.bytes / esize);
      done_ = s.bytes;
      break;
    case Step::Kind::Accumulate:
      dev::reduce2(s.type, s.op, s.dst, s.dst, s.src, s.bytes / esize);
      done_ = s.bytes;
      break;
    case Step::Kind::Send: {
      PeerConnection* conn;
      NCCLCHECK(comm.connection(s.sendPeer, &conn));
      SendChannel* ch = conn->send();
      if (!alignSend(ch)) {
        void* b; size_t a;
        NCCLCHECK(ch->acquire(&b, &a));  // surfaces a closed connection
        return ncclSuccess;
      }
      void* buf;
      size_t avail;
      NCCLCHECK(ch->acquire(&buf, &avail));
      size_t n = roundDown(std::min(avail, remaining), esize);
      if (n == 0) return ncclSuccess;
      dev::copy(buf, s.src + done_, n);
      ch->commit(n);
      done_ += n;
      break;
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
      const void* buf;
      size_t avail;
      NCCLCHECK(ch->peek(&buf, &avail));
      size_t n = roundDown(std::min(avail, remaining), esize);
      if (n == 0) return ncclSuccess;
      if (s.kind == Step::Kind::Recv) {
        if (s.dst) (s.streamDst ? dev::copyStreaming : dev::copy)(s.dst + done_, buf, n);
      } else {
        const void* local = s.src + done_;
        dev::reduce2(s.type, s.op, s.dst + done_, s.recvFirst ? buf : local, s.recvFirst ? local : buf, n / esize);
      }
      ch->release(n);
      done_ += n;
      break;
    }
    case Step::Kind::RecvReduceSend:
    case Step::Kind::RecvCopySend: {
      PeerConnection* inConn;
      PeerConnection* outConn;
      NCCLCHECK(comm.connection(s.recvPeer, &inConn));
      NCCLCHECK(comm.connection(s.sendPeer, &outConn));
      RecvChannel* in = inConn->recv();
      SendChannel* out = outConn->send();
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
      if (s.kind == Step::Kind::RecvReduceSend) {
        dev::reduce2(s.type, s.op, obuf, s.src + done_, ibuf, n / esize);
        if (s.dst) (s.streamDst ? dev::copyStreaming : dev::copy)(s.dst + done_, obuf, n);
      } else {
        dev::copy(obuf, ibuf, n);
        if (s.dst) (s.streamDst ? dev::copyStreaming : dev::copy)(s.dst + done_, ibuf, n);
      }
      in->release(n);
      out->commit(n);
      done_ += n;
      break;
    }
  }
  waitRecv_ = waitSend_ = -1;
  *state = done_ == s.bytes ? StepState::Done : StepState::Moved;
  return ncclSuccess;
}

ncclResult_t Lane::advance(Comm& comm, bool* progressed) {
  while (!finished_) {
    if (!hasCur_) {
      while (sourceIdx_ < sources_.size() && !sources_[sourceIdx_]->next(&cur_)) sourceIdx_++;
      if (sourceIdx_ == sources_.size()) {
        finished_ = true;
        *progressed = true;
        break;
      }
      if (cur_.bytes == 0) continue;  // both ends skip empty steps, so no padding either
      cur_.streamDst = cur_.streamDst || streamDst_[sourceIdx_];
      hasCur_ = true;
      done_ = 0;
      sendAligned_ = recvAligned_ = false;
    }
    StepState state;
    NCCLCHECK(runStep(comm, &state));
    if (state == StepState::Blocked) break;
    *progressed = true;
    if (state == StepState::Done) hasCur_ = false;
  }
  return ncclSuccess;
}

}  // namespace accl
