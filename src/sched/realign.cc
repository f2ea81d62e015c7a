#include "sched/realign.h"
#include <cstdio>
#include <sched.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>
#include "base/check.h"
#include "base/param.h"
#include "comm/realign_mailbox.h"
#include "comm/status_server.h"

namespace accl {
namespace {

using Clock = std::chrono::steady_clock;

// Fails the communicator: the streams cannot be trusted any more. The WARN goes first, so the
// failure takes it as its cause; the culprit goes into this rank's ring notice and board flag,
// so ranks still waiting name the rank that left, not this one that failed in turn.
ncclResult_t giveUp(Comm& c, ncclResult_t err, const std::string& why, int culprit = -1) {
  WARN("rank %d: mismatched calls, and the connections could not be realigned: %s; the communicator failed: destroy "
       "it and create a new one",
       c.rank, why.c_str());
  c.fail(err, culprit);
  return err;
}

// Whether the wait for the other ranks must stop: abort, revoke, a rank gone, ACCL_TIMEOUT.
// Only a rank this one still waits for counts (`waitingFor[p]`): a rank that finished its part
// of the realignment may leave, e.g. by ncclCommAbort after its call failed, without failing
// those that finish theirs after it. Its note travels apart from the ring that shows it gone
// (the status server reads it), so a rank gone fails the wait only once it stayed gone, with
// the note still missing, for kGoneGraceMs (`*goneSince`: when it was first seen gone).
constexpr int kGoneGraceMs = 100;
ncclResult_t checkWait(Comm& c, Clock::time_point since, const char* what, const std::vector<bool>& waitingFor,
                       Clock::time_point* goneSince) {
  if (c.abortFlag.load() || c.revoked.load()) return giveUp(c, ncclInvalidUsage, "the communicator was aborted");
  if (c.asyncError.load() != ncclSuccess) return static_cast<ncclResult_t>(c.asyncError.load());
  auto awaited = [&](int p) { return p >= 0 && p < c.nranks && p != c.rank && waitingFor[p]; };
  // A rank that destroyed its communicator is the cause; a rank whose communicator failed in
  // turn (its board flag says kBoardFailed) is a consequence, and its ring notice names the cause.
  int gone = -1;
  std::string how;
  for (int p = 0; p < c.nranks && gone < 0; p++)
    if (awaited(p) && c.board.hasDeparted(p) && !c.board.hasFailed(p)) gone = p, how = " left while ";
  if (gone < 0 && c.bootstrap) {
    int culprit = -1;
    const int dead = c.bootstrap->closedNeighbour(&culprit);
    if (culprit < 0) culprit = dead;
    if (dead >= 0 && (awaited(dead) || awaited(culprit))) gone = culprit, how = " left or failed while ";
  }
  for (int p = 0; p < c.nranks && gone < 0; p++)
    if (awaited(p) && c.board.hasFailed(p)) gone = p, how = " failed while ";
  if (gone < 0) {
    *goneSince = Clock::time_point();
  } else if (*goneSince == Clock::time_point()) {
    *goneSince = Clock::now();
  } else if (Clock::now() - *goneSince > std::chrono::milliseconds(kGoneGraceMs)) {
    return giveUp(c, ncclRemoteError, "rank " + std::to_string(gone) + how + what, gone);
  }
  static const int64_t timeoutSec = param::timeoutSec();
  if (timeoutSec > 0 && Clock::now() - since > std::chrono::seconds(timeoutSec))
    return giveUp(c, ncclRemoteError, std::string("ACCL_TIMEOUT expired while ") + what);
  return ncclSuccess;
}

// Sockets hold back padding until the next commit, and lent bytes go out later: push them,
// since the peers wait for every byte up to the positions this rank announced.
bool flushSends(Comm& c) {
  bool pending = false;
  for (auto& conn : c.conns) {
    if (!conn) continue;
    SendChannel* ch = conn->send();
    if (!ch->pendingLocal()) continue;
    ch->commit(0);
    pending = true;
  }
  return pending;
}

}  // namespace

RealignSite realignSiteOf(CommWork& w) {
  RealignSite s;
  for (const auto& op : w.ops) {
    if (op->stamp.magic != kCallStampMagic) continue;
    const uint64_t o = stampOrder(op->stamp);
    s.firstOrder = s.firstOrder == ~uint64_t(0) ? o : std::min(s.firstOrder, o);
    s.lastOrder = s.lastOrder == ~uint64_t(0) ? o : std::max(s.lastOrder, o);
  }
  for (const auto& op : w.ops)
    if (op->stamp.magic == kCallStampMagic && stampOrder(op->stamp) == s.firstOrder) s.current = &op->stamp;
  s.phases = &w.phases;
  s.boardAtStart = w.started ? w.boardAtStart : w.comm->board.posted;
  return s;
}

ncclResult_t realignConnections(Comm& c, RealignSite& site, RealignOutcome* out) {
  *out = RealignOutcome::NotYet;
  if (!c.realign.wanted()) return ncclSuccess;
  const uint64_t order = c.realign.wantedOrder();
  if (site.lastOrder != ~uint64_t(0) && site.lastOrder < order) return ncclSuccess;  // joins in a later call
  // A waiting cycle (sched/wait_cycle.h) or calls run in another order fail every rank's
  // call, whichever call it is in: each rank gives up all it sent and posted in it.
  const bool failsAnyway = (c.realign.flags(order) & (kRealignWaitCycle | kRealignRanOrder)) != 0;
  const bool inMismatched = site.firstOrder <= order || failsAnyway;

  // This rank's note: where its bytes of the calls up to the mismatched one end.
  RealignNote mine;
  mine.mismatchOrder = order;
  mine.firstOrder = site.firstOrder;
  mine.lastOrder = site.lastOrder;
  mine.rank = c.rank;
  mine.inMismatched = inMismatched ? 1 : 0;
  mine.callSeq = c.callSeq.load();
  mine.flags = c.realign.flags(order);
  if (site.current) mine.current = *site.current;
  const std::string localWhy = c.realign.localWhy(order);
  snprintf(mine.why, sizeof(mine.why), "%s", localWhy.c_str());
  mine.endPos.assign(c.nranks, 0);
  mine.nowPos.assign(c.nranks, 0);
  for (int p = 0; p < c.nranks; p++) {
    PeerConnection* conn = p == c.rank ? nullptr : c.conns[p].get();
    if (!conn) continue;
    uint64_t pos = conn->send()->position();
    mine.nowPos[p] = pos;
    if (!inMismatched && site.phases)  // a later call keeps what it sent already, if it carries on
      for (auto& phase : *site.phases)
        for (const Lane& lane : phase) pos = std::min(pos, lane.firstStampSentAt(p));
    mine.endPos[p] = pos;
  }
  mine.boardPosted = inMismatched ? c.board.posted : site.boardAtStart;
  // A rank ahead may have finished calls after the mismatched one already (a broadcast root
  // needs nobody): their bytes are kept too, from where the first of them began.
  if (!inMismatched) c.realign.earliestAfter(order, &mine.boardPosted, &mine.endPos);
  c.realign.deposit(mine, c.nranks);
  for (int p = 0; p < c.nranks; p++) {
    if (p == c.rank) continue;
    if (sendRealignNote(c, p, mine, 5000) != ncclSuccess)
      return giveUp(c, ncclRemoteError, "rank " + std::to_string(p) + " cannot be reached");
  }

  // Every rank's note.
  const Clock::time_point since = Clock::now();
  Clock::time_point goneSince{};
  std::vector<RealignNote> notes;
  for (unsigned pass = 0;; pass++) {
    notes = c.realign.notes(order);
    if (std::all_of(notes.begin(), notes.end(), [](const RealignNote& n) { return n.rank >= 0; })) break;
    if (c.realign.wantedOrder() < order)
      return giveUp(c, ncclInvalidUsage, "a second mismatch in an earlier call was found meanwhile");
    std::vector<bool> noteMissing(c.nranks);
    for (int p = 0; p < c.nranks; p++) noteMissing[p] = notes[p].rank < 0;
    NCCLCHECK(checkWait(c, since, "the others joined the realignment", noteMissing, &goneSince));
    flushSends(c);
    if (pass < 64) sched_yield();
    else usleep(200);
  }

  // The same decision on every rank, from the same notes.
  bool anyInMismatched = false;
  std::string why;
  int seenBy = -1;
  for (const RealignNote& n : notes) {
    anyInMismatched = anyInMismatched || n.inMismatched;
    if (why.empty() && n.why[0]) {
      why = n.why;
      seenBy = n.rank;
    }
  }
  // A call missing on a rank: a rank ahead is in what a rank in the mismatched call is in.
  // Not where a rank refused its call: its void call kept the numbers alike (a rank ahead then
  // finished the call, a broadcast that needed nothing of the refusing rank).
  bool missingCall = false;
  bool refused = false;
  uint32_t callSeq = 0;
  uint32_t flags = 0;
  for (const RealignNote& n : notes) flags |= n.flags;
  for (const RealignNote& n : notes) refused = refused || (n.current.flags & kStampRefused);
  for (const RealignNote& a : notes) {
    callSeq = std::max(callSeq, a.callSeq);
    for (const RealignNote& b : notes) {
      if (refused || !a.inMismatched || b.inMismatched || a.current.magic != kCallStampMagic) continue;
      CallStamp renumbered = b.current;
      renumbered.seq = a.current.seq;
      missingCall = missingCall || (b.current.seq > a.current.seq && sameStamp(renumbered, a.current));
    }
  }
  // A rank's call fails if it is the mismatched one, or if no rank is in that any more, or
  // if a call is missing (the ranks then pair their calls anew).
  // A waiting cycle or calls run in another order: every rank's call fails and the ranks
  // number their next calls alike again (one rank may be in a collective, another in a
  // receive that does not count as a call).
  const bool allFail = (flags & (kRealignWaitCycle | kRealignRanOrder)) != 0;
  auto failsOn = [anyInMismatched, missingCall, allFail](const RealignNote& n) {
    return n.inMismatched || !anyInMismatched || missingCall || allFail;
  };
  const bool fails = failsOn(notes[c.rank]);

  // Discard the unread bytes of those calls (of a failing call: all it sent); keep sending ours.
  for (unsigned pass = 0;; pass++) {
    bool left = flushSends(c);
    std::vector<bool> bytesMissing(c.nranks, false);
    for (int p = 0; p < c.nranks; p++) {
      const uint64_t target = failsOn(notes[p]) ? notes[p].nowPos[c.rank] : notes[p].endPos[c.rank];
      if (p == c.rank || target == 0) continue;
      PeerConnection* conn;
      ncclResult_t res = c.connection(p, &conn);
      if (res != ncclSuccess) return giveUp(c, res, "the connection from rank " + std::to_string(p) + " failed");
      RecvChannel* ch = conn->recv();
      while (ch->position() < target) {
        const void* buf;
        size_t avail;
        res = ch->peek(&buf, &avail);
        if (res != ncclSuccess) return giveUp(c, res, "the connection from rank " + std::to_string(p) + " failed");
        if (avail == 0) break;
        ch->release(std::min<uint64_t>(avail, target - ch->position()));
      }
      if (ch->position() < target) left = bytesMissing[p] = true;
      const bool held = static_cast<size_t>(p) < c.stampPushback.size() && c.stampPushback[p].held;
      if (ch->position() > target && fails) {
        // This rank read the stamp of the peer's next call, which carries on: its next call
        // takes it from the pushback. Anything else means the notes do not describe the streams.
        // (A call that carries on may have read more of a peer's call that carries on too.)
        if (!(held && ch->position() == target + kStampWireBytes && !failsOn(notes[p])))
          return giveUp(c, ncclInternalError, "this rank read past where rank " + std::to_string(p) +
                                                  "'s bytes of the mismatched calls end");
      } else if (held && ch->position() == target) {
        c.stampPushback[p].held = false;  // the peer's call failed too: its stamp went with it
      }
    }
    if (!left) break;
    // Our own unsent bytes wait for no one in particular: any rank gone then counts.
    if (std::none_of(bytesMissing.begin(), bytesMissing.end(), [](bool b) { return b; }))
      bytesMissing.assign(c.nranks, true);
    NCCLCHECK(checkWait(c, since, "it discarded the bytes of the mismatched calls", bytesMissing, &goneSince));
    if (pass < 64) sched_yield();
    else usleep(100);
  }

  // The board: past every operation any rank made in those calls.
  if (c.board.capacity > 0) {
    uint64_t posted = 0;
    for (const RealignNote& n : notes) posted = std::max(posted, n.boardPosted);
    if (c.board.posted < posted) c.board.posted = posted;
    const uint64_t mark = c.board.posted;
    auto raise = [mark](std::atomic<uint64_t>* a) {
      if (a && a->load(std::memory_order_relaxed) < mark) a->store(mark, std::memory_order_release);
    };
    if (c.rank < static_cast<int>(c.board.readDone.size())) raise(c.board.readDone[c.rank]);
    if (c.rank < static_cast<int>(c.board.sliced.size())) raise(c.board.sliced[c.rank]);
  }

  if (!fails && site.phases)
    for (auto& phase : *site.phases)
      for (Lane& lane : phase) lane.afterRealign();
  if (missingCall || allFail) {
    // Calls are numbered anew from the rank furthest ahead (only calls not issued yet: a call
    // queued on a stream keeps its number).
    uint32_t mineSeq = c.callSeq.load();
    while (mineSeq < callSeq && !c.callSeq.compare_exchange_weak(mineSeq, callSeq)) {
    }
    if (missingCall) why += " (a call missing on some rank: the ranks number their next calls alike again)";
    else if (flags & kRealignRanOrder)
      why += " (the ranks ran their calls in a different order: every rank's call fails and the ranks number their "
             "next calls alike again)";
  }
  c.realign.done(order);
  if (fails) {
    WARN("rank %d: mismatched calls: seen by rank %d: %s; this rank's call fails with ncclInvalidUsage; the "
         "connections are realigned and the communicator stays usable: the next matched call is exact",
         c.rank, seenBy, why.empty() ? "no details" : why.c_str());
    *out = RealignOutcome::CallFails;
  } else {
    WARN("rank %d: mismatched calls: seen by rank %d in an earlier call: %s; that call failed on the ranks in it, "
         "this rank's call was not part of it and carries on on realigned connections",
         c.rank, seenBy, why.empty() ? "no details" : why.c_str());
    *out = RealignOutcome::CallCarriesOn;
  }
  return ncclSuccess;
}

}  // namespace accl
