// kernel_realign.cc: after mismatched calls on the kernel path, puts every rank's collective
// streams back at zero so the communicator stays usable, as the host path does (sched/realign.h).
//
// A kernel that finds a chunk (or a waiting peer's call) stamped with another call gives up and
// reports it. Its rank freezes (KernelPath::freeze): it sets the word that makes its waiting
// kernels give up and tells every other rank, through the status servers, which freeze too.
// A frozen rank launches nothing; its calls and ncclCommGetAsyncError say ncclInvalidUsage.
// Its next call (on the thread that makes its calls, outside any capture) realigns, with every
// other rank doing the same in its own next call:
//   1. it waits until its own kernels have ended (they have given up);
//   2. its network proxy finishes the frame it is sending, then sends nothing more, and drops
//      whatever arrives; every rank tells every other one how many frames it sent it and how
//      many collective calls it has numbered (ready notes);
//   3. with every ready note in, its proxy drops frames until it has read every one the peer
//      sent, and the rank zeroes its stream counters (its mailbox header, its proxy box, the
//      kernels' report); then it says so (zeroed notes);
//   4. with every zeroed note in (no peer still reads or writes the old counters), it lets its
//      proxy and kernels run again, and the call fails with ncclInvalidUsage, WARNed. Every
//      collective call numbered up to the furthest one any rank had numbered (from the ready
//      notes) fails at once when it comes (admitCall): ranks queue calls ahead of the device and
//      each learned of the mismatch after another number of them, so calls pair up by number,
//      as before. The next call after those starts on streams at zero on every rank and is
//      exact. (A call missing on one rank leaves its numbers one behind, as it did before; the
//      host path renumbers instead, since there every rank stops in the same call.)
// Notes are RealignNote's (comm/realign_mailbox.h) with their own kinds: mismatchOrder holds
// the realignment's number (epoch), endPos the frames sent to each peer.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <thread>
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "comm/comm.h"
#include "comm/kernel_path.h"
#include "comm/status_server.h"

namespace accl {
namespace {

using Clock = std::chrono::steady_clock;

enum : uint32_t {
  kKernelStop = 0x4b520001,    // freeze: a rank saw a mismatch (why says it)
  kKernelReady = 0x4b520002,   // kernels ended, proxy paused: frames sent, calls numbered
  kKernelZeroed = 0x4b520003,  // stream counters zeroed, old frames dropped
  kKernelGone = 0x4b520004,    // the rank destroyed its frozen communicator
};

RealignNote kernelNote(const Comm& c, uint32_t kind, uint64_t epoch) {
  RealignNote n;
  n.mismatchOrder = epoch;
  n.rank = c.rank;
  n.inMismatched = kind;
  n.callSeq = c.callSeq.load();
  n.endPos.assign(c.nranks, 0);
  n.nowPos.assign(c.nranks, 0);
  return n;
}

// Sends `note` to every other rank; false (WARNed by sendRealignNote) when one cannot be reached.
bool tellAll(Comm& c, const RealignNote& note) {
  for (int p = 0; p < c.nranks; p++)
    if (p != c.rank && sendRealignNote(c, p, note, 5000) != ncclSuccess) return false;
  return true;
}

}  // namespace

bool isKernelRealignNote(const RealignNote& note) {
  return note.inMismatched >= kKernelStop && note.inMismatched <= kKernelGone;
}

void KernelPath::freeze(Comm& c, const std::string& why, bool tellPeers) {
  uint64_t epoch;
  {
    std::lock_guard<std::mutex> lk(realignMu_);
    if (frozen_.load()) return;
    frozenWhy_ = why;
    epoch = epoch_;
    frozen_.store(true, std::memory_order_release);
  }
  stopKernels();
  if (!tellPeers) return;
  WARN("rank %d: %s; the call fails on every rank, and each rank's next call realigns the collective streams (and "
       "fails too); the call after it runs",
       c.rank, why.c_str());
  RealignNote n = kernelNote(c, kKernelStop, epoch);
  snprintf(n.why, sizeof(n.why), "%s", why.c_str());
  if (!tellAll(c, n)) c.fail(ncclRemoteError);
}

void KernelPath::depositRealignNote(const RealignNote& note) {
  if (note.rank < 0 || note.rank >= nranks_ || note.endPos.size() != static_cast<size_t>(nranks_)) return;
  std::lock_guard<std::mutex> lk(realignMu_);
  if (note.inMismatched == kKernelGone) {
    goneRank_ = note.rank;
    return;
  }
  if (note.mismatchOrder < epoch_) return;  // a realignment that is over
  if (note.inMismatched == kKernelStop) {
    if (note.mismatchOrder > epoch_) {
      // A peer that finished the realignment before this rank did saw the next mismatch.
      earlyStop_ = true;
      earlyWhy_ = note.why;
      return;
    }
    if (frozen_.load()) return;
    frozenWhy_ = note.why;
    frozen_.store(true, std::memory_order_release);
    if (abortHost_) __atomic_store_n(abortHost_, 1, __ATOMIC_SEQ_CST);
    return;
  }
  auto& book = note.inMismatched == kKernelReady ? readyNotes_ : zeroedNotes_;
  std::vector<RealignNote>& v = book[note.mismatchOrder];
  if (v.size() != static_cast<size_t>(nranks_)) v.assign(nranks_, RealignNote{});
  v[note.rank] = note;
}

void KernelPath::leaveFrozen(Comm& c) {
  if (!frozen()) return;
  RealignNote n = kernelNote(c, kKernelGone, epoch_);
  for (int p = 0; p < c.nranks; p++)
    if (p != c.rank) (void)sendRealignNote(c, p, n, 1000);
}

ncclResult_t KernelPath::zeroStreams() {
  using kern::MailboxHeader;
  char* own = base_[rank_];
  // Everything but closedBy (how peers say they unmapped this mailbox at destroy).
  NCCLCHECK(backend_->fillDevice(own, 0, offsetof(MailboxHeader, closedBy)));
  NCCLCHECK(backend_->fillDevice(own + offsetof(MailboxHeader, stamps), 0,
                                 sizeof(MailboxHeader) - offsetof(MailboxHeader, stamps)));
  // The LL regions (kernels/ll_kernel.h): a line of an earlier call could carry the flag of a
  // call numbered from 0 again.
  NCCLCHECK(backend_->fillDevice(own + kern::slotsEnd(nranks_), 0, kern::llRegionsBytes(nranks_)));
  if (proxyBox_.get()) std::memset(proxyBox_.get(), 0, sizeof(kern::ProxyHeader));
  for (int w = 0; w < kern::kReportWords; w++) __atomic_store_n(&abortHost_[1 + w], 0, __ATOMIC_RELAXED);
  return ncclSuccess;
}

ncclResult_t KernelPath::admitCall(Comm& c, uint32_t seq) {
  if (seq == 0 || seq > failThrough_.load(std::memory_order_acquire)) return ncclSuccess;  // every matched call
  std::lock_guard<std::mutex> lk(realignMu_);
  if (!failWarned_)
    WARN("rank %d: call #%u fails: another rank had made calls up to #%u when the ranks realigned their collective "
         "streams after mismatched calls, and those failed there; calls pair up by number again from #%u",
         c.rank, seq, failThrough_.load(), failThrough_.load() + 1);
  else
    INFO(kSubsysColl, "rank %d: call #%u fails (realigned after mismatched calls: up to #%u)", c.rank, seq,
         failThrough_.load());
  failWarned_ = true;
  return ncclInvalidUsage;
}

namespace {

// One frozen rank's realignment, step by step (several ranks of one launch go in lockstep).
struct Realigning {
  Comm* c = nullptr;
  KernelPath* kp = nullptr;
  uint64_t epoch = 0;
  std::vector<uint64_t> framesSent;
};

// Fails the communicator: its streams cannot be trusted any more.
ncclResult_t giveUp(Comm& c, const std::string& who, const char* what, int culprit) {
  if (c.asyncError.load() != ncclSuccess) return static_cast<ncclResult_t>(c.asyncError.load());
  WARN("rank %d: mismatched calls on the kernel path, and the collective streams could not be realigned: %s while %s; "
       "the communicator failed: destroy it and create a new one",
       c.rank, who.c_str(), what);
  c.fail(ncclRemoteError, culprit);
  return ncclRemoteError;
}

// Whether the wait for the other ranks must stop: abort, a rank gone or failed, ACCL_TIMEOUT.
ncclResult_t checkWait(Realigning& r, int gone, Clock::time_point since, const char* what) {
  Comm& c = *r.c;
  if (c.abortFlag.load() || c.revoked.load()) return ncclInvalidUsage;
  if (c.asyncError.load() != ncclSuccess) return static_cast<ncclResult_t>(c.asyncError.load());
  int culprit = -1;
  if (gone >= 0) return giveUp(c, c.describePeer(gone) + " destroyed its communicator", what, gone);
  if (c.bootstrap && c.bootstrap->closedNeighbour(&culprit) >= 0)
    return giveUp(c, "rank " + std::to_string(culprit) + " failed or left", what, culprit);
  static const int64_t timeoutSec = param::timeoutSec();
  if (timeoutSec > 0 && Clock::now() - since > std::chrono::seconds(timeoutSec))
    return giveUp(c, "ACCL_TIMEOUT expired", what, -1);
  return ncclSuccess;
}

}  // namespace

ncclResult_t realignKernelPaths(const std::vector<Comm*>& comms) {
  std::vector<Realigning> all;
  for (Comm* c : comms) {
    Realigning r;
    r.c = c;
    r.kp = c->kernelPath.get();
    std::lock_guard<std::mutex> lk(r.kp->realignMu_);
    r.epoch = r.kp->epoch_;
    all.push_back(std::move(r));
  }
  const Clock::time_point since = Clock::now();
  const auto stepLimit = std::chrono::seconds(30);
  auto gone = [](Realigning& r) {
    std::lock_guard<std::mutex> lk(r.kp->realignMu_);
    return r.kp->goneRank_;
  };
  // 1-2. Own kernels ended (they gave up), proxy paused; ready notes out.
  for (Realigning& r : all) {
    while (!r.kp->lastLaunchDone(std::chrono::milliseconds(10)))
      NCCLCHECK(checkWait(r, gone(r), since, "waiting for this rank's kernels to end"));
    r.framesSent.assign(r.c->nranks, 0);
    if (r.kp->proxy_ && !r.kp->proxy_->pause(stepLimit, &r.framesSent))
      return giveUp(*r.c, "its network proxy did not finish the frame it was sending within 30 s", "pausing", -1);
    RealignNote n = kernelNote(*r.c, kKernelReady, r.epoch);
    n.endPos = r.framesSent;
    if (!tellAll(*r.c, n)) return giveUp(*r.c, "a rank could not be reached", "telling the others it was ready", -1);
  }
  // Every rank's ready note: how many frames each peer sent this one, and calls numbered.
  auto waitNotes = [&](std::map<uint64_t, std::vector<RealignNote>> KernelPath::*book, const char* what,
                       std::vector<std::vector<RealignNote>>* out) -> ncclResult_t {
    out->assign(all.size(), {});
    for (size_t i = 0; i < all.size(); i++) {
      Realigning& r = all[i];
      for (unsigned pass = 0;; pass++) {
        {
          std::lock_guard<std::mutex> lk(r.kp->realignMu_);
          std::vector<RealignNote>& v = (r.kp->*book)[r.epoch];
          if (v.size() != static_cast<size_t>(r.c->nranks)) v.assign(r.c->nranks, RealignNote{});
          int have = 0;
          for (int p = 0; p < r.c->nranks; p++) have += p == r.c->rank || v[p].rank >= 0;
          if (have == r.c->nranks) {
            (*out)[i] = v;
            break;
          }
        }
        NCCLCHECK(checkWait(r, gone(r), since, what));
        if (pass < 64) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    return ncclSuccess;
  };
  std::vector<std::vector<RealignNote>> ready, zeroed;
  NCCLCHECK(waitNotes(&KernelPath::readyNotes_, "waiting for the others to join the realignment", &ready));
  // 3. Old frames dropped, counters zeroed; zeroed notes out.
  for (size_t i = 0; i < all.size(); i++) {
    Realigning& r = all[i];
    std::vector<uint64_t> from(r.c->nranks, 0);
    for (int p = 0; p < r.c->nranks; p++)
      if (p != r.c->rank) from[p] = ready[i][p].endPos[r.c->rank];
    if (r.kp->proxy_ && !r.kp->proxy_->discard(from, stepLimit))
      return giveUp(*r.c, "its network proxy did not read the frames of the failed calls within 30 s", "dropping them",
                    -1);
    if (ncclResult_t z = r.kp->zeroStreams(); z != ncclSuccess) {
      WARN("rank %d: cannot zero this rank's collective mailbox to realign after mismatched calls: the communicator "
           "failed", r.c->rank);
      r.c->fail(z);
      return z;
    }
    if (!tellAll(*r.c, kernelNote(*r.c, kKernelZeroed, r.epoch)))
      return giveUp(*r.c, "a rank could not be reached", "telling the others its streams were at zero", -1);
  }
  NCCLCHECK(waitNotes(&KernelPath::zeroedNotes_, "waiting for the others to zero their streams", &zeroed));
  // 4. Run again; calls up to the furthest one numbered anywhere fail as they come.
  for (size_t i = 0; i < all.size(); i++) {
    Realigning& r = all[i];
    Comm& c = *r.c;
    uint32_t furthest = c.callSeq.load();
    for (int p = 0; p < c.nranks; p++)
      if (p != c.rank) furthest = std::max(furthest, ready[i][p].callSeq);
    std::string why;
    bool again = false;
    {
      std::lock_guard<std::mutex> lk(r.kp->realignMu_);
      why = r.kp->frozenWhy_;
      r.kp->epoch_++;
      r.kp->failThrough_.store(furthest, std::memory_order_release);
      r.kp->failWarned_ = false;
      r.kp->readyNotes_.erase(r.kp->readyNotes_.begin(), r.kp->readyNotes_.upper_bound(r.epoch));
      r.kp->zeroedNotes_.erase(r.kp->zeroedNotes_.begin(), r.kp->zeroedNotes_.upper_bound(r.epoch));
      {
        std::lock_guard<std::mutex> lk2(r.kp->mu_);
        r.kp->reported_ = false;
      }
      again = r.kp->earlyStop_;
      if (again) {
        r.kp->frozenWhy_ = r.kp->earlyWhy_;
        r.kp->earlyStop_ = false;
      } else {
        __atomic_store_n(r.kp->abortHost_, 0, __ATOMIC_SEQ_CST);
        r.kp->frozen_.store(false, std::memory_order_release);
      }
    }
    if (r.kp->proxy_) r.kp->proxy_->resume();
    WARN("rank %d: this call (#%u) fails: it realigned the collective streams after mismatched calls (%s); calls "
         "up to #%u fail on every rank (the furthest any rank had made), and call #%u runs",
         c.rank, c.callSeq.load(), why.c_str(), furthest, furthest + 1);
  }
  return ncclInvalidUsage;
}

}  // namespace accl
