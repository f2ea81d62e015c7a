// call_stamp.h: the per-call fingerprint that rides inside the data a call already sends
// (transports/call_stamp.h), on by default (ACCL_CHECK_MISMATCH=1). A collective's stamp holds
// its operation, count, type, reduction, root and the communicator's call number; a send's,
// its byte count. The sender puts it in front of its first bytes on each connection (and in
// its board slot); the receiver compares it with its own call's before it touches the data.
// A mismatch fails the call with ncclInvalidUsage and a WARN naming both calls, and fails
// the communicator (its byte streams are no longer aligned), which every other rank then
// sees as a peer failure.
#pragma once
#include <string>
#include <utility>
#include <vector>
#include "sched/op.h"
#include "transports/call_stamp.h"
#include "transports/transport.h"

namespace accl {

constexpr uint8_t kSendKind = static_cast<uint8_t>(OpKind::Send);  // sends and receives carry this kind

// Whether calls carry stamps (ACCL_CHECK_MISMATCH=1; 0 and 2, the full exchange, do not).
bool callStampsOn();
// Whether collective kernels' calls carry stamps: also with 2, whose full exchange the kernel
// path does not make (without stamps it would check nothing there).
bool kernelStampsOn();
// The stamp of `op`, the communicator's call number `seq` (sends and receives: the number of
// the last collective before them). A receive's stamp is the one the matching send carries.
CallStamp stampOf(const OpDesc& op, uint32_t seq);
// The order of calls on a communicator: collective k, then the sends/receives issued after it.
inline uint64_t stampOrder(const CallStamp& s) { return uint64_t(s.seq) * 2 + (s.kind == kSendKind ? 1 : 0); }
// "AllReduce(1000 x float32, sum) (call #5)"; "no call stamp" for data without one.
std::string describeStamp(const CallStamp& s);
// The same for a stamp's 24 bytes as a collective kernel reports them (kern::KStamp).
std::string describeStampBytes(const void* stamp);
// The mismatch seen by this rank (its call `mine`, `peer`'s `theirs`, seen `where`): WARNs
// both calls and asks for a realignment of the connections (sched/realign.h), which fails the
// call on every rank in it and leaves the communicator usable. Returns ncclInvalidUsage. Data
// without a stamp (ranks with different ACCL_CHECK_MISMATCH) cannot be realigned: that fails
// the communicator.
ncclResult_t failMismatch(Comm& c, const CallStamp& mine, int peer, const CallStamp& theirs, const char* where);
// `peer` sent this rank, now in call `mine`, the stamp of an earlier call `theirs` that nobody
// read: the ranks disagreed about that call. Asks for a realignment (no error of its own: the
// realignment decides which call fails).
void noteStaleStamp(Comm& c, const CallStamp& mine, int peer, const CallStamp& theirs, const char* where);

// The stamps of one call on its connections: sent once in front of the call's first bytes to
// each peer, checked once in front of its first bytes from each peer. Resumable: a stamp
// crosses the end of a ring in pieces.
class StampGate {
 public:
  // Starts a new call (null: no stamps); a gate keeps its state while the call stays the same.
  void reset(const CallStamp* stamp) {
    if (stamp == stamp_) return;
    stamp_ = stamp;
    peers_.clear();
  }
  // Where this gate's first stamp to `peer` began in the stream (~0: none sent), over every
  // call it served: a realignment keeps the bytes from there on (sched/realign.h).
  uint64_t firstSentAt(int rank) const {
    for (const auto& [r, at] : firstSent_)
      if (r == rank) return at;
    return ~uint64_t(0);
  }
  // After a realignment: forgets a stale stamp read from a peer, so the real one is read next.
  // True if there was one (the stream position moved: the caller pads again).
  bool forgetStale() {
    bool any = false;
    for (Peer& p : peers_) {
      if (!p.stale) continue;
      p.stale = false;
      p.got = 0;  // what it sent stays sent
      any = true;
    }
    return any;
  }
  const CallStamp* stamp() const { return stamp_; }
  // Whether any of `peer`'s stamp has been read (its data may follow at the channel's head).
  bool receivedFrom(int rank) const {
    for (const Peer& p : peers_)
      if (p.rank == rank && p.got > 0) return true;
    return false;
  }
  // *ready once the stamp to `peer` is in the channel (committed as padding: the data that
  // follows carries it on sockets). ch must be at a 16-byte boundary.
  ncclResult_t send(SendChannel* ch, int peer, bool* ready);
  // *ready once `peer`'s stamp has been read and matched; ncclInvalidUsage (WARNed) if not.
  ncclResult_t recv(Comm& c, RecvChannel* ch, int peer, bool* ready);

 private:
  struct Peer {
    int rank;
    uint8_t sent = 0;  // stamp bytes sent, of kStampWireBytes
    uint8_t got = 0;   // stamp bytes received
    bool stale = false;  // what it read is an earlier call's stamp (a realignment is wanted)
    bool bad = false;    // what it read is another call's stamp (this call failed)
    unsigned char in[kStampWireBytes] = {};
  };
  Peer& peer(int rank);
  const CallStamp* stamp_ = nullptr;
  std::vector<Peer> peers_;
  std::vector<std::pair<int, uint64_t>> firstSent_;
};

}  // namespace accl
