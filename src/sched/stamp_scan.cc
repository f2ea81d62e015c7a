// checkStrayStamps (work.h): a blocked rank looks at what its peers sent that nobody reads.
// Between calls every connection's stream ends at a call boundary, so the first bytes there
// (after the step alignment) are a call stamp; a stamp of an earlier call, or of the same
// call number but another call, means the ranks disagree. Stamps of later calls are a peer
// that is ahead, which is fine. Run only while blocked, so it costs nothing on the fast path.
#include <cstring>
#include "base/check.h"
#include "sched/work.h"

namespace accl {
namespace {

// Whether stamp `s`, sent by a peer and not read by any step now, shows mismatched calls.
bool stray(const CallStamp& s, const CallStamp& mine, const std::vector<Lane>& lanes) {
  if (s.magic != kCallStampMagic) return true;
  for (const Lane& l : lanes)
    if (!l.finished() && l.stamp() && sameStamp(*l.stamp(), s)) return false;  // a call we are in
  const uint64_t theirs = stampOrder(s), ours = stampOrder(mine);
  if (mine.kind == kSendKind) return theirs < ours;  // sends: several calls share one number
  return theirs <= ours;
}

}  // namespace

ncclResult_t checkStrayStamps(CommWork& w) {
  if (!w.started || w.finished || w.phase >= w.phases.size()) return ncclSuccess;
  Comm& c = *w.comm;
  const std::vector<Lane>& lanes = w.phases[w.phase];
  const CallStamp* mine = nullptr;  // the earliest call of this phase
  for (const Lane& l : lanes)
    if (!l.finished() && l.stamp() && (!mine || stampOrder(*l.stamp()) < stampOrder(*mine))) mine = l.stamp();
  if (!mine) return ncclSuccess;
  for (int p = 0; p < c.nranks; p++) {
    if (p == c.rank) continue;
    // The board: a post of an operation this rank has not posted yet.
    // A step waits for p's data of this call and has none of it yet: if p is already in a
    // later call, it skipped ours.
    bool awaited = false, reading = false;
    for (const Lane& l : lanes) {
      if (l.finished()) continue;
      reading = reading || l.stampReceivedFrom(p);
      awaited = awaited || l.waitingRecvFrom() == p;
    }
    awaited = awaited && !reading;
    if (c.board.capacity > 0 && static_cast<int>(c.board.slots[0].size()) == c.nranks) {
      const uint64_t next = c.board.posted + 1;
      const BoardSlot* slot = c.board.slots[next & 1][p];
      if (slot->seq.load(std::memory_order_acquire) == next) {
        if (stray(slot->stamp, *mine, lanes))
          return failMismatch(c, *mine, p, slot->stamp, "posted on the shared-memory board by");
        // Ahead on the board while we wait for its bytes on a connection: seen on two checks
        // in a row, so bytes still crossing a socket are not taken for missing ones.
        if (awaited && stampOrder(slot->stamp) > stampOrder(*mine)) {
          if (w.skippedBy == p) return failMismatch(c, *mine, p, slot->stamp, "posted on the shared-memory board by");
          w.skippedBy = p;
          continue;
        }
      }
    }
    // A connection none of the phase's steps has begun to read in this call.
    PeerConnection* conn = c.conns[p].get();
    if (!conn || reading) continue;
    RecvChannel* ch = conn->recv();
    const void* buf;
    size_t avail;
    if (ch->peek(&buf, &avail) != ncclSuccess) continue;  // a failed connection: its own error path
    const size_t pad = (kStreamAlign - ch->position() % kStreamAlign) % kStreamAlign;
    if (avail < pad + sizeof(CallStamp)) continue;  // nothing yet (or a stamp across the ring's end)
    CallStamp s;
    std::memcpy(&s, static_cast<const char*>(buf) + pad, sizeof(s));
    // A later call's stamp first, while a step waits for this call's bytes from p: the
    // stream is in order, so p never sent them.
    if (stray(s, *mine, lanes) || (awaited && s.magic == kCallStampMagic && stampOrder(s) > stampOrder(*mine))) {
      if (s.magic == kCallStampMagic && stampOrder(s) < stampOrder(*mine)) {
        // An earlier call's bytes nobody read: the realignment discards them and decides
        // which call fails (sched/realign.h).
        noteStaleStamp(c, *mine, p, s, "received from");
        return ncclSuccess;
      }
      return failMismatch(c, *mine, p, s, "received from");
    }
  }
  return ncclSuccess;
}

}  // namespace accl
