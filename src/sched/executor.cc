// Executor: drives the works of one group (or one stream task) to completion in the
// calling thread. Waiting follows what we measured on 2-vCPU machines: spin briefly (long
// enough to catch a peer's reply without paying a 20-30 us wake-up), yield when ranks
// outnumber cores, then sleep on the rank's doorbell.
#include <sched.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include "base/check.h"
#include "base/param.h"
#include "comm/status_server.h"
#include "base/trace.h"
#include "sched/direct_wait.h"
#include "sched/realign.h"
#include "sched/wait_cycle.h"
#include "sched/yield_gate.h"
#include "sched/work.h"

namespace accl {
namespace {

using Clock = std::chrono::steady_clock;

int64_t usecSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count();
}

inline void cpuRelax() { __builtin_ia32_pause(); }

// After a connection failed: which rank's loss started it? Shared memory rings and the
// bootstrap ring carry the culprit named by whichever rank saw the loss first; give their
// notices a moment to arrive, so every survivor can name the lost rank, not just a neighbour.
// Failing that, a peer that closed its socket connection by itself (after 50 ms, so a named
// culprit still wins over a neighbour that merely cascaded the failure).
int findCulprit(Comm& c) {
  for (int attempt = 0; attempt < 20; attempt++) {
    for (auto& conn : c.conns)
      if (conn && conn->reportedCulprit() >= 0) return conn->reportedCulprit();
    // ShmDirect: a rank that left without a connection to us (one that destroyed its
    // communicator; a failed one is a consequence whose notices name the cause, so it comes last)
    for (int p = 0; p < c.nranks; p++)
      if (p != c.rank && c.board.hasDeparted(p) && !c.board.hasFailed(p)) return p;
    int culprit = -1;
    if (c.bootstrap && c.bootstrap->closedNeighbour(&culprit) >= 0 && culprit >= 0) return culprit;
    for (auto& conn : c.conns)
      if (attempt >= 5 && conn && conn->closedByPeer() >= 0) return conn->closedByPeer();
    for (int p = 0; p < c.nranks; p++)
      if (attempt >= 5 && p != c.rank && c.board.hasFailed(p)) return p;
    usleep(10000);
  }
  return -1;
}

// Where a finished work's calls began (comm/realign_mailbox.h recordCallStart), for a
// realignment this rank joins later, ahead of the mismatched call.
void recordCallStart(CommWork& w) {
  Comm& c = *w.comm;
  uint64_t order = ~uint64_t(0);
  for (const auto& op : w.ops)
    if (op->stamp.magic == kCallStampMagic) order = std::min(order, stampOrder(op->stamp));
  if (order == ~uint64_t(0) || c.nranks < 2) return;
  std::vector<uint64_t>* sentAt =
      c.realign.recordCallStart(order, w.boardAtStart == ~uint64_t(0) ? c.board.posted : w.boardAtStart, c.nranks);
  for (auto& phase : w.phases)
    for (const Lane& lane : phase)
      for (int p = 0; p < c.nranks; p++) (*sentAt)[p] = std::min((*sentAt)[p], lane.firstStampSentAt(p));
}

// fatal = false: the error is this work's alone (mismatched calls caught before any data
// moved); the communicator stays usable.
void finishWork(CommWork& w, ncclResult_t res, int culprit = -1, bool fatal = true) {
  Comm& c = *w.comm;
  w.finished = true;
  if (res != ncclSuccess && res != ncclInvalidUsage && c.abortFlag.load()) {
    // The connections failed because this rank's own ncclCommAbort closed them: say so,
    // rather than blame the peer at their other end.
    WARN("rank %d: operation interrupted by ncclCommAbort on this rank (%s)", c.rank, pncclGetErrorString(res));
    res = ncclInvalidUsage;
    culprit = -1;
  }
  w.result = res;
  if (res == ncclSuccess) recordCallStart(w);
  if (res == ncclRemoteError && culprit < 0 && c.asyncError.load() == ncclSuccess) culprit = findCulprit(c);
  {
    std::lock_guard<std::mutex> lk(c.statusMu);
    c.blockedReport.clear();
    clearWaitNote(c);
  }
  if (res != ncclSuccess && fatal) c.fail(res, culprit);
  if (traceEnabled()) {
    std::string name;
    for (const auto& op : w.ops) {
      if (!name.empty()) name += " + ";
      name += std::string(opKindName(op->kind)) + " " + std::to_string(op->count) + " x " + dev::typeName(op->type);
    }
    int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
    traceRecord(&c, c.rank, c.nranks, {w.ticket, name, w.startUsec ? w.startUsec : now, now, res});
  }
  if (w.started) c.inFlight.fetch_sub(1);
  c.doneTicket.store(w.ticket + 1, std::memory_order_release);
  ringDoorbell(c.bell());  // another stream's work may wait for this ticket
}

// A realignment after mismatched calls (sched/realign.h) that `w` takes part in. `erred`: a
// lane of `w` already failed on the mismatch, so the work cannot carry on. True when it
// finished the work.
bool realignWork(CommWork& w, bool erred) {
  Comm& c = *w.comm;
  RealignSite site = realignSiteOf(w);
  RealignOutcome out;
  ncclResult_t res = realignConnections(c, site, &out);
  if (res != ncclSuccess) {
    finishWork(w, res);  // the communicator failed (WARNed)
    return true;
  }
  if (out == RealignOutcome::CallFails) {
    finishWork(w, ncclInvalidUsage, -1, false);
    return true;
  }
  if (erred) {
    c.fail(ncclInvalidUsage, -1);
    WARN("rank %d: mismatched calls: this rank's call met data of another call, but the realignment found it was "
         "not part of the mismatched call; the communicator failed: destroy it and create a new one",
         c.rank);
    finishWork(w, ncclInvalidUsage);
    return true;
  }
  if (out == RealignOutcome::CallCarriesOn) w.skippedBy = -1;
  return false;
}

// The void call of work `w` that carries a stamp (sched/op.h OpDesc::refused); null if none.
const OpDesc* refusedCallOf(const CommWork& w) {
  for (const auto& op : w.ops)
    if (op->refusedArg != RefusedArg::None && op->stamp.magic == kCallStampMagic) return op.get();
  return nullptr;
}

ncclResult_t progressSockets(Comm& c) {
  for (auto& conn : c.conns) {
    // Socket channels have helper threads and no fd; progress() reports their failures.
    if (!conn) continue;
    NCCLCHECK(conn->send()->progress());
    NCCLCHECK(conn->recv()->progress());
  }
  return ncclSuccess;
}

bool socketsPending(Comm& c) {
  for (auto& conn : c.conns)
    if (conn && conn->send()->pendingLocal()) return true;
  return false;
}

int64_t usecOf(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}
int64_t nowUsec() { return usecOf(Clock::now()); }

// The time, read once per pass over the works and only if something needs it: a small op
// finishes in one or two passes, and each clock read was a few percent of its time.
class PassClock {
 public:
  int64_t usec() {
    if (usec_ < 0) usec_ = nowUsec();
    return usec_;
  }

 private:
  int64_t usec_ = -1;
};

// One pass over every unfinished work. Returns true if anything moved.
bool progressOnce(std::vector<std::unique_ptr<CommWork>>& works, bool* allDone) {
  bool progressed = false;
  *allDone = true;
  PassClock clock;
  for (auto& wp : works) {
    CommWork& w = *wp;
    if (w.finished) continue;
    *allDone = false;
    Comm& c = *w.comm;
    bool workMoved = false;
    struct MarkProgress {  // stamps the work's progress clock when anything moved this pass
      CommWork& w;
      bool& moved;
      bool& any;
      PassClock& clock;
      ~MarkProgress() {
        if (moved) {
          w.lastProgressUsec = clock.usec();
          any = true;
        }
      }
    } mark{w, workMoved, progressed, clock};
    if (!w.started) {
      if (c.doneTicket.load(std::memory_order_acquire) != w.ticket) continue;
      if (c.abortFlag.load() || c.revoked.load() || c.asyncError.load() != ncclSuccess) {
        int err = c.asyncError.load();
        // An earlier failure already WARNed its cause; an INFO here keeps that cause as the
        // text ncclGetLastError returns.
        const char* why = c.abortFlag.load() ? "was aborted" : c.revoked.load() ? "was revoked"
                                                                                  : "has a pending error from an earlier failure";
        if (err != ncclSuccess) INFO(kSubsysColl, "rank %d: operation not run: communicator %s", c.rank, why);
        else WARN("rank %d: operation not run: communicator %s", c.rank, why);
        finishWork(w, err != ncclSuccess ? static_cast<ncclResult_t>(err) : ncclInvalidUsage);
        workMoved = true;
        continue;
      }
      // A void call (a call refused for its arguments, sched/op.h): it asks for the realignment
      // that fails the peers' matching call, and takes part in it.
      if (const OpDesc* refused = refusedCallOf(w)) {
        c.realign.request(stampOrder(refused->stamp), refused->refused);
        if (!c.realign.wanted()) {
          finishWork(w, ncclInvalidArgument, -1, false);  // already realigned past it: nothing to fail
          workMoved = true;
          continue;
        }
        if (!realignWork(w, false)) continue;  // an earlier realignment first: joins again next pass
        workMoved = true;
        continue;
      }
      // A realignment asked for while this work waited its turn: it joins before it starts.
      if (c.realign.wanted() && realignWork(w, false)) {
        workMoved = true;
        continue;
      }
      w.started = true;
      if (w.boardAtStart == ~uint64_t(0)) w.boardAtStart = c.board.posted;
      w.startUsec = clock.usec();
      c.inFlight.fetch_add(1);
      workMoved = true;
    }
    if (c.abortFlag.load(std::memory_order_relaxed) || c.revoked.load(std::memory_order_relaxed)) {
      WARN("rank %d: operation interrupted by %s\n%s", c.rank,
           c.abortFlag.load() ? "ncclCommAbort" : "ncclCommRevoke", hangReport(w, nowUsec()).c_str());
      finishWork(w, ncclInvalidUsage);
      workMoved = true;
      continue;
    }
    // A realignment: a work in the mismatched call joins at once. One in a later call first
    // goes as far as it can and joins once it is stuck (below): the calls before the one a rank
    // ahead is in are matched, so a rank behind finishes its call and joins at the start of
    // the next. Joining at once failed the call it was finishing here and the next one on the
    // rank ahead (seen: a 2-rank board all-reduce after broadcasts with both ranks as root).
    if (c.realign.wanted() && realignSiteOf(w).firstOrder <= c.realign.wantedOrder() && realignWork(w, false)) {
      workMoved = true;
      continue;
    }
    ncclResult_t res = progressSockets(c);
    std::string mismatch;
    bool mismatchFatal = false;
    while (res == ncclSuccess && w.phase < w.phases.size() && mismatch.empty()) {
      bool phaseDone = true;
      for (Lane& lane : w.phases[w.phase]) {
        if (lane.finished()) continue;
        res = lane.advance(c, w.stream, &workMoved);
        if (res != ncclSuccess) break;
        if (!lane.finished()) phaseDone = false;
      }
      if (res != ncclSuccess || !phaseDone) break;
      w.phase++;
      workMoved = true;
      if (w.fingerprints && w.phase == 1) mismatch = compareFingerprints(w.fingerprints.get(), c.nranks, &mismatchFatal);
    }
    if (mismatch.empty() && w.phase == w.phases.size() && !w.p2pBroken.empty()) {
      mismatch = w.p2pBroken;
      mismatchFatal = true;
    } else if (mismatch.empty() && w.phase == w.phases.size() && !w.p2pMismatch.empty()) {
      mismatch = w.p2pMismatch;
    }
    if (!mismatch.empty()) {
      WARN("rank %d: mismatched calls (ACCL_CHECK_MISMATCH): %s; %s", c.rank, mismatch.c_str(),
           mismatchFatal ? "the byte stream cannot be trusted, failing the communicator"
                         : "the communicator stays usable and later matched calls are unaffected");
      finishWork(w, ncclInvalidUsage, -1, mismatchFatal);
      workMoved = true;
      continue;
    }
    if (res == ncclInvalidUsage && c.realign.wanted()) {  // a lane met a mismatch (WARNed)
      realignWork(w, true);
      workMoved = true;
      continue;
    }
    if (res == ncclSuccess && w.phase == w.phases.size()) {
      res = progressSockets(c);
      if (res == ncclSuccess && socketsPending(c)) continue;  // data still staged locally
    }
    if (res == ncclSuccess && w.phase < w.phases.size() && !workMoved && c.realign.wanted() &&
        realignWork(w, false)) {
      workMoved = true;
      continue;
    }
    if (res != ncclSuccess || w.phase == w.phases.size()) {
      finishWork(w, res);
      workMoved = true;
    }
  }
  return progressed;
}

// Tells every connection of the works' communicators whether this thread sleeps (their
// helper threads must then watch for arrivals) or drives them again.
void setOwnerAsleep(std::vector<std::unique_ptr<CommWork>>& works, bool asleep) {
  for (auto& w : works)
    for (auto& conn : w->comm->conns)
      if (conn) conn->ownerSleeps(asleep);
}

// What a blocked executor can sleep on: doorbells (peers' progress, sockets included) and
// device fences (its own queued data calls).
struct WaitPlan {
  std::vector<Doorbell*> bells;
  dev::Backend* deviceBackend = nullptr;  // set when some lane waits on its backend's fences
  std::vector<dev::Fence> fences;
  bool ticketWait = false;  // a work waits for another thread's work on its communicator
};

WaitPlan planWait(std::vector<std::unique_ptr<CommWork>>& works) {
  WaitPlan p;
  for (auto& w : works) {
    if (w->finished) continue;
    Comm& c = *w->comm;
    p.ticketWait = p.ticketWait || !w->started;
    if (w->started && w->phase < w->phases.size()) {
      for (const Lane& lane : w->phases[w->phase]) {
        if (!lane.waitingOnDevice()) continue;
        p.deviceBackend = c.backend.get();
        p.fences.push_back(lane.deviceFence());
      }
    }
    for (Doorbell* b : {c.bell(), c.board.ownBell})  // rings, and the ShmDirect board
      if (b && std::find(p.bells.begin(), p.bells.end(), b) == p.bells.end()) p.bells.push_back(b);
  }
  return p;
}

// Peer death shows as EOF on the bootstrap ring sockets (the kernel closes them when a
// process dies); checked only while blocked, so it costs nothing on the fast path.
bool checkPeers(std::vector<std::unique_ptr<CommWork>>& works) {
  bool failed = false;
  for (auto& w : works) {
    if (w->finished || !w->started) continue;
    Comm& c = *w->comm;
    if (!c.bootstrap || c.abortFlag.load()) continue;  // our own abort closed the ring: the next pass says so
    int culprit = -1;
    int dead = c.bootstrap->closedNeighbour(&culprit);
    if (dead >= 0) {
      if (culprit == dead) {
        WARN("rank %d: peer %s closed its connection without finishing (process died, aborted or its link went "
             "down); failing the operation",
             c.rank, c.describePeer(dead).c_str());
      } else {
        WARN("rank %d: peer %s failed after losing %s; failing the operation", c.rank, c.describePeer(dead).c_str(),
             c.describePeer(culprit).c_str());
      }
      finishWork(*w, ncclRemoteError, culprit);
      failed = true;
    }
  }
  return failed;
}

// Calls that peers sent and no step reads (sched/stamp_scan.cc), checked only while blocked.
bool checkStamps(std::vector<std::unique_ptr<CommWork>>& works) {
  bool failed = false;
  for (auto& w : works) {
    ncclResult_t res = checkStrayStamps(*w);
    if (res == ncclSuccess) {
      failed = failed || (!w->finished && w->comm->realign.wanted());  // the next pass joins it
      continue;
    }
    if (w->comm->realign.wanted()) realignWork(*w, true);
    else finishWork(*w, res);
    failed = true;
  }
  return failed;
}

int onlineCores() {
  static int n = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return n > 0 ? n : 1;
}

// The collective calls a status line says its rank is blocked in ("AllReduce(1000 x float32,
// sum)"), or "" when it is not blocked in one (idle, running, no answer) or its work has
// sends/receives, which legitimately differ between ranks.
std::string blockedCalls(const std::string& line) {
  size_t at = line.find("blocked: op #");
  if (at == std::string::npos) return "";
  size_t colon = line.find(": ", at + 13);
  size_t end = line.find(';', colon);
  if (colon == std::string::npos || end == std::string::npos) return "";
  std::string calls = line.substr(colon + 2, end - colon - 2);
  if (calls.find("Send(") != std::string::npos || calls.find("Recv(") != std::string::npos) return "";
  return calls;
}

// Asks every rank where it is and prints the answers, naming ranks that are behind (still in
// an earlier op, or idle), not responding (alive but stopped), gone, or blocked in a
// different call than the others. For warnings only the lowest blocked rank prints it (one
// block per job, not per rank); a rank about to fail on ACCL_TIMEOUT always prints, since
// its failure will unblock the others before their own timers expire.
// Returns "behind: ...; gone: ..." (the suspects), printed or not.
std::string printHangSummary(Comm& c, bool always, int budgetMs) {
  std::vector<std::string> lines = gatherStatus(c, budgetMs);
  bool lowerPrints = false;
  for (int p = 0; p < c.rank && !always; p++) lowerPrints = lowerPrints || lines[p].find("blocked:") != std::string::npos;
  std::string text, behind, gone, stopped, different, sharesDevice;
  std::string firstCalls;
  int firstRank = -1;
  for (int p = 0; p < c.nranks; p++) {
    text += "\n  " + lines[p];
    auto add = [p](std::string& list) { list += (list.empty() ? " rank " : ", rank ") + std::to_string(p); };
    if (lines[p].find("no answer") != std::string::npos) add(gone);
    else if (lines[p].find("not responding") != std::string::npos) add(stopped);
    else if (lines[p].find("idle") != std::string::npos) {
      add(behind);
      // A rank of this process on this device that never got to the call may be stuck in a
      // device-synchronising CUDA call, which waits for this collective's stream.
      const PeerInfo& me = c.peers[c.rank];
      const PeerInfo& peer = c.peers[p];
      if (me.deviceId != 0 && peer.deviceId == me.deviceId && peer.pid == me.pid && peer.pidNs == me.pidNs &&
          peer.hostHash == me.hostHash)
        add(sharesDevice);
    }
    std::string calls = blockedCalls(lines[p]);
    if (calls.empty()) continue;
    if (firstRank < 0) {
      firstRank = p;
      firstCalls = calls;
    } else if (calls != firstCalls) {
      if (different.empty()) different = " rank " + std::to_string(firstRank) + " in " + firstCalls;
      different += ", rank " + std::to_string(p) + " in " + calls;
    }
  }
  std::string suspects = std::string("behind (not in this op):") + (behind.empty() ? " none" : behind) +
                         "; gone:" + (gone.empty() ? " none" : gone);
  if (!stopped.empty()) suspects += "; not responding:" + stopped;
  if (!different.empty()) suspects += "; in different operations (mismatched calls?):" + different;
  if (!sharesDevice.empty())
    suspects += "; behind and on this process's CUDA device:" + sharesDevice +
                " (a thread of this process blocked in cudaFree, cudaDeviceSynchronize or a synchronous cudaMemcpy "
                "waits for this collective's stream, which waits for that rank: issue every rank's call before "
                "such a call, or synchronise only the rank's own stream)";
  if (!lowerPrints)
    // The suspects also on the first line: a reader that keeps one line (an exception's text,
    // a grep) still learns whom the ranks wait for.
    WARN("ACCL hang summary for comm %p (%d ranks), gathered by rank %d; %s:%s\n  => %s", static_cast<void*>(&c),
         c.nranks, c.rank, suspects.c_str(), text.c_str(), suspects.c_str());
  return suspects;
}

// Timeouts and hang reports, checked only while blocked.
void checkHangs(std::vector<std::unique_ptr<CommWork>>& works, uint64_t* seenReports) {
  static const int64_t timeoutUsec = param::timeoutSec() * 1000000;
  static const int64_t warnUsec = param::hangWarnSec() * 1000000;
  const int64_t now = nowUsec();
  const uint64_t requests = hangReportRequests();
  const bool requested = requests != *seenReports;
  *seenReports = requests;
  for (auto& wp : works) {
    CommWork& w = *wp;
    if (w.finished) continue;
    const int64_t stalled = now - w.lastProgressUsec;
    if (w.started && stalled >= 1000000) {
      std::string report = hangReport(w, now);
      std::lock_guard<std::mutex> lk(w.comm->statusMu);
      w.comm->blockedReport = report.substr(report.find("op #"));
    }
    const bool timedOut = timeoutUsec > 0 && stalled >= timeoutUsec && w.started;
    std::string suspects;
    // On a timeout the summary must not delay the failure: peers get one peer-check period.
    if (timedOut || requested || (warnUsec > 0 && stalled >= warnUsec && !w.hangReported))
      suspects = printHangSummary(*w.comm, timedOut, timedOut ? std::max<int>(100, param::peerCheckMsec()) : 2000);
    // A work still queued behind its communicator's previous op is timed out through that op.
    if (timedOut) {
      std::string report = hangReport(w, now);
      // WARNed before the failure, so the communicator's cause (Comm::fail takes this rank's
      // newest WARN when no peer is to blame) is this report naming whom it waited for, not
      // the multi-line hang summary above it.
      WARN("ACCL_TIMEOUT=%lld s expired without progress; %s; failing the operation\n%s",
           static_cast<long long>(timeoutUsec / 1000000), suspects.c_str(), report.c_str());
      finishWork(w, ncclRemoteError);
    } else if (requested || (warnUsec > 0 && stalled >= warnUsec && !w.hangReported)) {
      w.hangReported = w.hangReported || !requested;
      WARN("%s%s", requested ? "" : "no progress for ACCL_HANG_WARN seconds (still waiting)\n",
           hangReport(w, now).c_str());
    }
  }
}

// While blocked: this rank's wait notes, and on rank 0 the wait-cycle check (sched/wait_cycle.h).
// True when a realignment was asked for (the next pass joins it).
bool checkWaitCycles(std::vector<std::unique_ptr<CommWork>>& works) {
  const int64_t now = nowUsec();
  bool asked = false;
  for (auto& w : works) {
    if (w->finished || !w->started) continue;
    publishWaitNote(*w, now);
    asked = checkWaitCycle(*w, now) || asked;
  }
  return asked;
}

// The rank moves again: its wait notes no longer say where it is.
void clearWaitNotes(std::vector<std::unique_ptr<CommWork>>& works) {
  for (auto& w : works) {
    std::lock_guard<std::mutex> lk(w->comm->statusMu);
    clearWaitNote(*w->comm);
  }
}

}  // namespace

ncclResult_t executeWorks(std::vector<std::unique_ptr<CommWork>>& works) {
  bool done = false;
  return executeWorksFor(works, -1, &done);
}

ncclResult_t executeWorksFor(std::vector<std::unique_ptr<CommWork>>& works, int64_t budgetUsec, bool* done) {
  *done = false;
  int maxLocal = 1;
  bool spansHosts = false;
  for (auto& w : works) {
    maxLocal = std::max(maxLocal, w->comm->localRankCount());
    spansHosts = spansHosts || w->comm->localRankCount() < w->comm->nranks;
  }
  const bool oversubscribed = maxLocal > onlineCores();
  int64_t spinUsec = param::spinUsec();
  // Measured on 2 vCPUs: pause-spinning is only good when nothing else wants the core; with
  // more ranks than cores, or any other load, it steals the core from the rank we wait for
  // (30-200 us per step). sched_yield costs ~0.3 us when nobody else is runnable and hands
  // the core over when someone is, so waits yield first and sleep only after that.
  if (spinUsec < 0) spinUsec = 0;
  const int64_t yieldUsec = waitYieldUsec(oversubscribed, spansHosts);
  const int64_t peerCheckUsec = param::peerCheckMsec() * 1000;

  const Clock::time_point begin = Clock::now();
  for (auto& w : works) w->lastProgressUsec = usecOf(begin);
  uint64_t seenReports = hangReportRequests();
  Clock::time_point idleSince;
  Clock::time_point lastPeerCheck = begin;
  bool idle = false;
  bool noted = false;  // wait notes published since the last progress
  for (;;) {
    bool allDone;
    if (progressOnce(works, &allDone)) {
      idle = false;
      if (noted) clearWaitNotes(works);
      noted = false;
      continue;
    }
    if (allDone) break;
    if (!idle) {
      idle = true;
      idleSince = Clock::now();
    }
    int64_t waited = usecSince(idleSince);
    if (budgetUsec >= 0 && waited >= budgetUsec) {  // the caller hands the rest on
      if (noted) clearWaitNotes(works);
      return ncclSuccess;
    }
    if (waited < spinUsec) {
      for (int i = 0; i < 16; i++) cpuRelax();
      continue;
    }
    // Yields that lose the core to another process's thread make waits sleep (sched/yield_gate.h).
    if (waited < spinUsec + yieldUsec && yieldCore(oversubscribed, true)) continue;
    if (usecSince(lastPeerCheck) >= peerCheckUsec) {
      lastPeerCheck = Clock::now();
      if (checkPeers(works) || checkStamps(works)) continue;
    }
    checkHangs(works, &seenReports);
    if (waited >= kWaitNoteUsec) {
      noted = true;
      if (checkWaitCycles(works)) continue;
    }
    WaitPlan plan = planWait(works);
    std::vector<uint32_t> seqs(plan.bells.size());
    setOwnerAsleep(works, true);  // before the last look, so arrivals after it ring the bell
    enterDoorbells(plan.bells.data(), static_cast<int>(plan.bells.size()), seqs.data());
    if (progressOnce(works, &allDone) || allDone) {
      leaveDoorbells(plan.bells.data(), static_cast<int>(plan.bells.size()));
      setOwnerAsleep(works, false);
      idle = false;
      if (noted && !allDone) clearWaitNotes(works);
      noted = false;
      continue;
    }
    if (plan.deviceBackend) {
      // Device work finishes without ringing a doorbell: wait on it briefly, then look again
      // at everything (peers may have moved meanwhile).
      plan.deviceBackend->waitAny(plan.fences, 200);
    } else {
      // Every transport rings the rank's doorbell (socket helper threads included).
      waitDoorbells(plan.bells.data(), static_cast<int>(plan.bells.size()), seqs.data(), 100000);
    }
    leaveDoorbells(plan.bells.data(), static_cast<int>(plan.bells.size()));
    setOwnerAsleep(works, false);
  }
  *done = true;
  ncclResult_t first = ncclSuccess;
  for (auto& w : works)
    if (w->result != ncclSuccess && first == ncclSuccess) first = w->result;
  return first;
}

}  // namespace accl
