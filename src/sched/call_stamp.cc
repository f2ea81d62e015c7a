#include "sched/call_stamp.h"
#include <algorithm>
#include <cstdio>
#include <cstring>
#include "base/check.h"
#include "base/param.h"
#include "comm/realign_mailbox.h"

namespace accl {

bool callStampsOn() {
  static const bool on = param::checkMismatch() == 1;
  return on;
}

bool kernelStampsOn() {
  static const bool on = param::checkMismatch() != 0;
  return on;
}

CallStamp stampOf(const OpDesc& op, uint32_t seq) {
  CallStamp s;
  s.magic = kCallStampMagic;
  if (op.isP2p()) {
    // What the message is, as both ends see it: its size and its sender.
    s.kind = static_cast<uint8_t>(OpKind::Send);
    s.type = static_cast<uint8_t>(ncclInt8);
    s.count = op.count * dev::typeSize(op.type);
    s.root = op.kind == OpKind::Send ? op.comm->rank : op.peer;
    s.seq = seq;
    return s;
  }
  s.seq = seq;
  s.count = op.count;
  s.root = op.root;
  s.kind = static_cast<uint8_t>(op.kind);
  s.type = static_cast<uint8_t>(op.type);
  s.red = static_cast<uint8_t>(op.red);
  // Ranks in different ACCL_DETERMINISTIC modes plan differently shaped reductions.
  const bool rankOrder = (op.kind == OpKind::AllReduce || op.kind == OpKind::Reduce ||
                          op.kind == OpKind::ReduceScatter) &&
                         op.comm->deterministic.load(std::memory_order_relaxed);
  s.flags = static_cast<uint8_t>((op.avg ? 1 : 0) | (op.preMul ? 2 : 0) | (rankOrder ? 4 : 0));
  return s;
}

std::string describeStamp(const CallStamp& s) {
  if (s.magic != kCallStampMagic) return "no call stamp (set ACCL_CHECK_MISMATCH the same on every rank)";
  const OpKind kind = static_cast<OpKind>(s.kind);
  if (kind == OpKind::Send)
    return "a send of " + std::to_string(s.count) + " bytes from rank " + std::to_string(s.root) + " (after call #" +
           std::to_string(s.seq) + ")";
  const bool reduces = kind == OpKind::AllReduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter;
  std::string d = describeCall(kind, s.count, static_cast<ncclDataType_t>(s.type),
                               reduces ? static_cast<dev::RedKind>(s.red) : dev::RedKind::Sum, s.flags & 1,
                               s.flags & 2, s.root);
  if (s.flags & 4) d += " in rank order (deterministic)";
  return d + " (call #" + std::to_string(s.seq) + ")";
}

std::string describeStampBytes(const void* stamp) {
  CallStamp s;
  std::memcpy(&s, stamp, sizeof(s));
  return describeStamp(s);
}

ncclResult_t failMismatch(Comm& c, const CallStamp& mine, int peer, const CallStamp& theirs, const char* where) {
  if (theirs.magic != kCallStampMagic) {
    // Without a stamp nothing says where the peer's bytes end: the streams cannot be realigned.
    c.fail(ncclInvalidUsage, -1);
    WARN("rank %d: mismatched calls: this rank is in %s but the data %s rank %d is for %s; the call fails and the "
         "communicator with it: destroy it and create a new one (ACCL_CHECK_MISMATCH=0 turns this check off)",
         c.rank, describeStamp(mine).c_str(), where, peer, describeStamp(theirs).c_str());
    return ncclInvalidUsage;
  }
  char text[400];
  snprintf(text, sizeof(text), "rank %d is in %s but the data %s rank %d is for %s", c.rank,
           describeStamp(mine).c_str(), where, peer, describeStamp(theirs).c_str());
  WARN("rank %d: mismatched calls: %s; the call fails on every rank in it and the communicator stays usable "
       "(ACCL_CHECK_MISMATCH=0 turns this check off)",
       c.rank, text);
  // A receive that met a collective (or the reverse): the ranks ran their calls in another
  // order, and only a collective counts as a call, so their call numbers now differ by one.
  // Every rank's call fails and the realignment numbers the next calls alike again.
  const bool ranOrder = (mine.kind == kSendKind) != (theirs.kind == kSendKind);
  c.realign.request(std::min(stampOrder(mine), stampOrder(theirs)), text, ranOrder ? kRealignRanOrder : 0);
  return ncclInvalidUsage;
}

void noteStaleStamp(Comm& c, const CallStamp& mine, int peer, const CallStamp& theirs, const char* where) {
  char text[400];
  snprintf(text, sizeof(text), "rank %d, in %s, found data %s rank %d for %s, which no call of this rank read",
           c.rank, describeStamp(mine).c_str(), where, peer, describeStamp(theirs).c_str());
  INFO(kSubsysColl, "rank %d: mismatched calls: %s", c.rank, text);
  c.realign.request(stampOrder(theirs), text);
}

StampGate::Peer& StampGate::peer(int rank) {
  for (Peer& p : peers_)
    if (p.rank == rank) return p;
  if (peers_.empty()) peers_.reserve(4);
  peers_.push_back(Peer{rank});
  return peers_.back();
}

ncclResult_t StampGate::send(SendChannel* ch, int rank, bool* ready) {
  Peer& p = peer(rank);
  if (p.sent == 0 && firstSentAt(rank) == ~uint64_t(0)) {
    if (firstSent_.empty()) firstSent_.reserve(4);
    firstSent_.emplace_back(rank, ch->position());
  }
  while (p.sent < kStampWireBytes) {
    void* buf;
    size_t avail;
    NCCLCHECK(ch->acquire(&buf, &avail));
    const size_t n = std::min<size_t>(avail, kStampWireBytes - p.sent);
    if (n == 0) {
      *ready = false;
      return ncclSuccess;
    }
    unsigned char wire[kStampWireBytes] = {};
    std::memcpy(wire, stamp_, sizeof(CallStamp));
    std::memcpy(buf, wire + p.sent, n);
    ch->commitPadding(n);  // the step's data follows at once
    p.sent = static_cast<uint8_t>(p.sent + n);
  }
  *ready = true;
  return ncclSuccess;
}

ncclResult_t StampGate::recv(Comm& c, RecvChannel* ch, int rank, bool* ready) {
  Peer& p = peer(rank);
  if (p.bad) return ncclInvalidUsage;  // WARNed when it was read
  if (p.stale) {
    *ready = false;  // until the realignment (sched/realign.h) forgets it
    return ncclSuccess;
  }
  if (p.got == kStampWireBytes) {
    *ready = true;
    return ncclSuccess;
  }
  if (p.got == 0 && !c.stampPushback.empty() && c.stampPushback[rank].held) {
    // Read by a call that failed on it (sched/realign.h): this one is next in the stream.
    std::memcpy(p.in, c.stampPushback[rank].bytes, kStampWireBytes);
    c.stampPushback[rank].held = false;
    p.got = kStampWireBytes;
  }
  while (p.got < kStampWireBytes) {
    const void* buf;
    size_t avail;
    NCCLCHECK(ch->peek(&buf, &avail));
    const size_t n = std::min<size_t>(avail, kStampWireBytes - p.got);
    if (n == 0) {
      *ready = false;
      return ncclSuccess;
    }
    std::memcpy(p.in + p.got, buf, n);
    ch->release(n);
    p.got = static_cast<uint8_t>(p.got + n);
  }
  CallStamp theirs;
  std::memcpy(&theirs, p.in, sizeof(theirs));
  if (!sameStamp(theirs, *stamp_)) {
    if (theirs.magic == kCallStampMagic && stampOrder(theirs) < stampOrder(*stamp_)) {
      p.stale = true;
      noteStaleStamp(c, *stamp_, rank, theirs, "received from");
      *ready = false;
      return ncclSuccess;
    }
    p.bad = true;
    if (theirs.magic == kCallStampMagic && stampOrder(theirs) > stampOrder(*stamp_)) {
      // The peer is ahead: its later call may carry on after the realignment, and this is
      // its first bytes of it. Kept, in case (the realignment drops it otherwise).
      if (c.stampPushback.size() != static_cast<size_t>(c.nranks)) c.stampPushback.resize(c.nranks);
      std::memcpy(c.stampPushback[rank].bytes, p.in, kStampWireBytes);
      c.stampPushback[rank].held = true;
    }
    return failMismatch(c, *stamp_, rank, theirs, "received from");
  }
  *ready = true;
  return ncclSuccess;
}

}  // namespace accl
