#include "sched/board_fast_path.h"
#include <algorithm>
#include <sched.h>
#include <chrono>
#include <utility>
#include "base/check.h"
#include "base/param.h"
#include "base/trace.h"
#include "sched/board_consume.h"
#include "sched/call_stamp.h"
#include "sched/direct_wait.h"
#include "sched/group.h"
#include "sched/planner.h"
#include "sched/realign.h"
#include "sched/tuner.h"
#include "sched/work.h"
#include "sched/yield_gate.h"

namespace accl {
namespace {

using Clock = std::chrono::steady_clock;
// Measured at np2 on 2 vCPUs: 4..64 pauses between yields all give the best time on an idle
// machine (a yield on every check: +0.1..0.2 us); 16 also kept a loaded machine near its best.
constexpr unsigned kPausesPerYield = 16;

bool qualifies(const OpDesc& op, const Comm& c, size_t bytes) {
  static const bool enabled = param::boardDirect() != 0 && param::checkMismatch() != 2;
  if (!enabled || inGroup()) return false;
  if (op.stream.kind != dev::StreamKind::Caller && op.stream.kind != dev::StreamKind::Host) return false;
  if ((op.kind != OpKind::AllReduce && op.kind != OpKind::AllGather) || op.preMul || c.nranks < 2) return false;
  if (!c.board.available(bytes) || bytes == 0 || !c.backend->hostBuffers() || traceEnabled()) return false;
  if (c.abortFlag.load(std::memory_order_relaxed) || c.revoked.load(std::memory_order_relaxed) ||
      c.asyncError.load(std::memory_order_relaxed) != ncclSuccess || c.realign.wanted())
    return false;  // the executor reports why the op cannot run (or joins the realignment)
  // The same choice as the planner's (sched/planner.cc), in-place reads and slices excepted:
  // those need the executor's second synchronisation.
  return chooseAlgo(c.algoPolicy, op.kind, bytes, c.nranks, c.board.capacity, c.board.peersReadable) ==
             Algo::ShmDirect &&
         !useShmRead(op.kind, bytes, c.nranks, c.board.peersReadable) && !useShmSlices(op.kind, bytes, c.nranks);
}

// One direct call. run() posts once it is the communicator's turn, folds the posts as they
// appear, and after its wait budget hands what is left to the executor.
class BoardDirectOp {
 public:
  BoardDirectOp(OpDesc&& op, uint64_t ticket) : op_(std::move(op)), ticket_(ticket) {}

  // Until done, or until it waited budgetUsec (>= 0; -1: no limit) for peers: *done false
  // then, and a later call carries on.
  ncclResult_t run(int64_t budgetUsec, bool* done) {
    if (handed_.empty()) {
      Comm& c = *op_.comm;
      // Another thread's work on this communicator still runs (host streams take their
      // ticket when queued): let the executor wait for it, as it would for a planned op.
      if (seq_ == 0 && c.doneTicket.load(std::memory_order_acquire) != ticket_) return handOver(budgetUsec, done);
      if (seq_ == 0) {
        c.inFlight.fetch_add(1);
        seq_ = postOnBoard(c.board, c.rank, op_.sendbuff, fold().len, fold().stamp);
      }
      const bool all = waitForPosts(c, budgetUsec);
      if (mismatch_ >= 0) {
        // Nothing of the peer's post was used. The call fails on every rank in it; the
        // realignment (sched/realign.h) keeps the communicator usable.
        ncclResult_t res = failMismatch(c, op_.stamp, mismatch_, c.board.slots[seq_ & 1][mismatch_]->stamp,
                                        "posted on the shared-memory board by");
        if (c.realign.wanted()) {
          RealignSite site;
          site.firstOrder = site.lastOrder = stampOrder(op_.stamp);
          site.boardAtStart = seq_ - 1;
          site.current = &op_.stamp;
          RealignOutcome out;
          ncclResult_t rr = realignConnections(c, site, &out);
          if (rr != ncclSuccess) res = rr;
          else if (out != RealignOutcome::CallFails) {
            c.fail(ncclInvalidUsage, -1);
            WARN("rank %d: mismatched calls on the shared-memory board that the realignment could not place; the "
                 "communicator failed: destroy it and create a new one",
                 c.rank);
          }
        }
        c.inFlight.fetch_sub(1);
        c.doneTicket.store(ticket_ + 1, std::memory_order_release);
        ringDoorbell(c.bell());
        *done = true;
        return res;
      }
      if (all) {
        finish(c);
        *done = true;
        return ncclSuccess;
      }
      c.inFlight.fetch_sub(1);  // the executor counts the op again while it runs it
    }
    return handOver(budgetUsec, done);
  }

 private:
  BoardFold fold() const {
    BoardFold f;
    f.gather = op_.kind == OpKind::AllGather;
    f.type = op_.type;
    f.op = op_.red;
    f.dst = static_cast<char*>(op_.recvbuff);
    f.stride = f.len = op_.count * dev::typeSize(op_.type);
    f.stamp = op_.stamp.magic ? &op_.stamp : nullptr;
    return f;
  }

  // Folds posts until all are in (true) or the wait budget is spent.
  bool waitForPosts(Comm& c, int64_t budgetUsec) {
    const BoardFold f = fold();
    if (consumeBoardPosts(c.board, seq_, c.nranks, f, &next_, &mismatch_)) return true;
    if (mismatch_ >= 0) return false;
    // Pause-spin (10 us with a core per rank; a yield every few pauses hands the core to a
    // peer that shares it), then yield.
    DirectWaitBudget budget = directWaitBudget(c, 10);
    if (budgetUsec >= 0) budget.totalUsec = std::min(budget.totalUsec, budgetUsec);
    // The clock starts at the first check: most calls find the posts within 64 spins and
    // never read it (a clock read is a sizeable part of an 8-byte call).
    Clock::time_point start;
    int64_t waited = 0;
    for (unsigned spins = 1;; spins++) {
      if (spins == 64) start = Clock::now();
      if ((spins & 63) == 0) {
        waited = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
        if (waited >= budget.totalUsec || c.abortFlag.load(std::memory_order_relaxed) || c.board.hasDeparted(next_))
          return false;
      }
      if (waited >= budget.spinUsec || spins % kPausesPerYield == 0) {
        // Yields that lose the core to another process: spin out the spin budget, then let
        // the executor sleep (sched/yield_gate.h).
        const bool pastSpin = waited >= budget.spinUsec;
        if (!yieldCore(budget.oversubscribed, pastSpin)) {
          if (pastSpin) return false;
          __builtin_ia32_pause();
        }
      } else {
        __builtin_ia32_pause();
      }
      if (consumeBoardPosts(c.board, seq_, c.nranks, f, &next_, &mismatch_)) return true;
      if (mismatch_ >= 0) return false;
    }
  }

  void finish(Comm& c) {
    const BoardFold f = fold();
    if (op_.avg && !f.gather) dev::divide(op_.type, f.dst, f.dst, c.nranks, op_.count);
    c.inFlight.fetch_sub(1);
    c.doneTicket.store(ticket_ + 1, std::memory_order_release);
    ringDoorbell(c.bell());  // a work of another thread may wait for this ticket
  }

  // The executor finishes the op: planned as usual, its board step resumed where this left
  // it (afresh when nothing was posted yet).
  ncclResult_t handOver(int64_t budgetUsec, bool* done) {
    if (handed_.empty()) {
      std::vector<std::unique_ptr<OpDesc>> ops;
      ops.push_back(std::make_unique<OpDesc>(op_));
      std::unique_ptr<CommWork> w;
      ncclResult_t res = planWork(std::move(ops), &w);
      if (res != ncclSuccess) {
        // Not expected for an op that qualified (no scratch, no p2p). Fail the communicator
        // so that peers waiting on this rank do not hang silently, and free its ticket.
        op_.comm->fail(res, -1);
        op_.comm->doneTicket.store(ticket_ + 1, std::memory_order_release);
        *done = true;
        return res;
      }
      w->ticket = ticket_;
      INFO(kSubsysColl, "rank %d: %s of %zu bytes handed to the executor (%s)", op_.comm->rank, opKindName(op_.kind),
           fold().len, seq_ == 0 ? "the communicator was busy" : "waiting for a late rank");
      if (seq_ != 0) w->boardAtStart = seq_ - 1;  // the direct call posted already
      if (seq_ != 0)
        for (auto& phase : w->phases)
          for (Lane& lane : phase) lane.resumeBoardStep(seq_, next_);
      handed_.push_back(std::move(w));
    }
    return executeWorksFor(handed_, budgetUsec, done);
  }

  OpDesc op_;
  uint64_t ticket_;
  uint64_t seq_ = 0;  // the board operation posted (0: not yet)
  int next_ = 0;      // the next rank whose post to fold
  int mismatch_ = -1; // a rank whose post is for another call (sched/call_stamp.h)
  std::vector<std::unique_ptr<CommWork>> handed_;
};

}  // namespace

bool runOnBoardDirectly(OpDesc& op, ncclResult_t* res) {
  Comm& c = *op.comm;
  if (!qualifies(op, c, op.count * dev::typeSize(op.type))) return false;
  if (op.stream.kind == dev::StreamKind::Caller) {
    // Only on an idle communicator: the op takes the next ticket and runs at once, so issue
    // order is kept (a work queued by another thread meanwhile waits for this ticket).
    uint64_t ticket = c.doneTicket.load(std::memory_order_acquire);
    if (!c.issueTicket.compare_exchange_strong(ticket, ticket + 1, std::memory_order_acq_rel)) return false;
    BoardDirectOp direct(std::move(op), ticket);
    bool done = false;
    *res = direct.run(-1, &done);
    return true;
  }
  // A host stream: queued in issue order like any op (its ticket taken now); the stream
  // starts it on this thread when idle and its worker finishes what is left.
  const uint64_t ticket = c.issueTicket.fetch_add(1);
  const dev::StreamRef stream = op.stream;
  auto direct = std::make_shared<BoardDirectOp>(std::move(op), ticket);
  *res = enqueueResumableOn(*c.backend, stream, c.helperCpus,
                            [direct](int64_t budgetUsec, bool* done) { return direct->run(budgetUsec, done); });
  return true;
}

}  // namespace accl
