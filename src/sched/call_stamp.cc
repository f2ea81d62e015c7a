#include "sched/call_stamp.h"
#include <algorithm>
#include <cstring>
#include "base/check.h"
#include "base/param.h"

namespace accl {

bool callStampsOn() {
  static const bool on = param::checkMismatch() == 1;
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

ncclResult_t failMismatch(Comm& c, const CallStamp& mine, int peer, const CallStamp& theirs, const char* where) {
  // Failed first: the WARN below is then the text ncclGetLastError returns.
  c.fail(ncclInvalidUsage, -1);
  WARN("rank %d: mismatched calls: this rank is in %s but the data %s rank %d is for %s; the call fails and the "
       "communicator with it (ACCL_CHECK_MISMATCH=0 turns this check off)",
       c.rank, describeStamp(mine).c_str(), where, peer, describeStamp(theirs).c_str());
  return ncclInvalidUsage;
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
  if (p.got == kStampWireBytes) {
    *ready = true;
    return ncclSuccess;
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
  if (!sameStamp(theirs, *stamp_)) return failMismatch(c, *stamp_, rank, theirs, "received from");
  *ready = true;
  return ncclSuccess;
}

}  // namespace accl
