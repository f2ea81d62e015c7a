#include "sched/pairs_fast_path.h"
#include <sched.h>
#include <algorithm>
#include <chrono>
#include "base/check.h"
#include "base/param.h"
#include "base/trace.h"
#include "coll/algorithms.h"
#include "sched/direct_wait.h"
#include "sched/group.h"
#include "sched/planner.h"
#include "sched/tuner.h"
#include "sched/work.h"
#include "sched/yield_gate.h"

namespace accl {
namespace {

using Clock = std::chrono::steady_clock;
// Blocked passes between yields while spinning (ACCL_DIRECT_SPIN_USEC > 0): each pass already
// makes a recv() per waiting socket, so the yield is only there to let a peer that shares the
// core run.
constexpr unsigned kPassesPerYield = 16;
// Larger all-reduces are not worth a second copy of the executor's logic: their sends go
// through the helper threads anyway (commits above 16 KiB, transports/socket).
constexpr size_t kDirectMaxBytes = 16 << 10;

bool qualifies(const OpDesc& op, const Comm& c, size_t bytes) {
  static const bool enabled = param::pairsDirect() != 0 && param::checkMismatch() != 2;
  if (!enabled || inGroup()) return false;
  if (op.stream.kind != dev::StreamKind::Caller && op.stream.kind != dev::StreamKind::Host) return false;
  if (op.kind != OpKind::AllReduce || op.preMul || c.nranks < 2) return false;
  if (bytes == 0 || bytes > kDirectMaxBytes || !c.backend->hostBuffers() || traceEnabled()) return false;
  if (c.abortFlag.load(std::memory_order_relaxed) || c.revoked.load(std::memory_order_relaxed) ||
      c.asyncError.load(std::memory_order_relaxed) != ncclSuccess || c.realign.wanted())
    return false;  // the executor reports why the op cannot run (or joins the realignment)
  // The planner's choice (sched/planner.cc, host buffers): AllPairs runs the gathered
  // rank-order all-reduce in either determinism mode.
  return chooseAlgo(c.algoPolicy, op.kind, bytes, c.nranks, c.board.capacity, c.board.peersReadable) ==
         Algo::AllPairs;
}

size_t roundDown(size_t n, size_t esize) { return n - n % esize; }

// Waits for a host data call (the host backend's fences complete before they are returned).
void settle(dev::Backend& be, dev::Fence f) {
  while (f.pending() && !be.poll(f)) __builtin_ia32_pause();
}

// One direct call: the AllPairs steps of the op, run in order on the calling thread the way
// a Lane runs them (same padding, same chunking by what the channels offer, same kernels).
class PairsDirectOp {
 public:
  PairsDirectOp(OpDesc&& op, uint64_t ticket) : op_(std::move(op)), ticket_(ticket), c_(*op_.comm) {}

  // Until done, or until it waited budgetUsec (>= 0; -1: no limit) for peers: *done false
  // then, and a later call carries on (a host stream's worker, board_fast_path.cc's way).
  ncclResult_t run(int64_t budgetUsec, bool* done) {
    if (!handed_.empty()) return executeWorksFor(handed_, budgetUsec, done);
    // Another thread's work on this communicator still runs (host streams take their ticket
    // when queued): let the executor wait for it, as it would for a planned op.
    if (!src_ && c_.doneTicket.load(std::memory_order_acquire) != ticket_) return handOver(budgetUsec, done);
    if (!src_) start();
    // Yield on every blocked pass, then hand over. Unlike the board's direct call no spinning
    // by default: a pass is a recv() per awaited socket, not a cache-line read, so 16 passes
    // between yields kept the core ~10 us, and on a loaded machine (load ~16 on 2 vCPUs) the
    // 8-byte np2 all-reduce took 38-54 us best with a 10 us spin against 22-24 us yielding
    // every pass (the executor's path: 25-27); on a quiet one the two were within the noise.
    DirectWaitBudget budget = directWaitBudget(c_, 0);
    if (budgetUsec >= 0) budget.totalUsec = std::min(budget.totalUsec, budgetUsec);
    Clock::time_point idleSince;
    bool idle = false;
    for (unsigned blocked = 1;; blocked++) {
      bool moved = false, finished = false;
      if (advance(&moved, &finished) != ncclSuccess) break;  // the executor meets it again and reports it
      if (finished) {
        finish();
        *done = true;
        return ncclSuccess;
      }
      if (moved) {
        idle = false;
        continue;
      }
      if (!idle) {
        idle = true;
        idleSince = Clock::now();
        blocked = 1;
      }
      const int64_t waited = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - idleSince).count();
      if (waited >= budget.totalUsec || c_.abortFlag.load(std::memory_order_relaxed)) break;
      // Yields that lose the core to another process: past the spin budget the executor sleeps
      // instead (sched/yield_gate.h).
      const bool pastSpin = waited >= budget.spinUsec;
      if ((pastSpin || blocked % kPassesPerYield == 0) && !yieldCore(budget.oversubscribed, pastSpin) && pastSpin)
        break;
    }
    c_.inFlight.fetch_sub(1);  // the executor counts the op again while it runs it
    return handOver(budgetUsec, done);
  }

 private:
  void start() {
    c_.inFlight.fetch_add(1);
    // The planner's arguments (addCollective), so the steps are the same as the executor's.
    src_ = makeRankOrderGatheredAllReduce(collArgsOf(op_, c_));
    gate_.reset(op_.stamp.magic ? &op_.stamp : nullptr);
    streamDst_ = streamsOutput(op_, c_.nranks);
  }

  // Moves the steps as far as the channels allow. *finished: every step is done and every
  // byte sent is on the wire (what the executor waits for before it finishes a work).
  ncclResult_t advance(bool* moved, bool* finished) {
    for (;;) {
      if (!hasCur_) {
        if (!sourceDone_) {
          sourceDone_ = !src_->next(&cur_);
          if (!sourceDone_) {
            if (cur_.bytes == 0) continue;  // the lane skips empty steps on both ends too
            cur_.streamDst = cur_.streamDst || streamDst_;
            hasCur_ = true;
            done_ = 0;
            sendAligned_ = recvAligned_ = false;
          }
        }
        if (sourceDone_) {
          *finished = !sendsStaged();
          return ncclSuccess;
        }
      }
      bool stepMoved = false;
      NCCLCHECK(runStep(&stepMoved));
      if (done_ == cur_.bytes) hasCur_ = false;
      if (!stepMoved) return ncclSuccess;
      *moved = true;
    }
  }

  bool sendsStaged() {
    for (auto& conn : c_.conns)
      if (conn && conn->send()->pendingLocal()) return true;
    return false;
  }

  // Lane::alignSend / alignRecv: pad the stream to kStreamAlign before a step's bytes.
  bool alignSend(SendChannel* ch) {
    if (!sendAligned_) sendAligned_ = padSendStream(ch);
    return sendAligned_;
  }
  bool alignRecv(RecvChannel* ch) {
    if (!recvAligned_) recvAligned_ = padRecvStream(ch);
    return recvAligned_;
  }

  // The step kinds the gathered rank-order all-reduce makes (coll/rank_order_reduce.cc).
  ncclResult_t runStep(bool* moved) {
    Step& s = cur_;
    dev::Backend& be = *c_.backend;
    const dev::StreamRef& st = op_.stream;
    const size_t esize = dev::typeSize(s.type);
    const size_t remaining = s.bytes - done_;
    switch (s.kind) {
      case Step::Kind::Copy:
        if (s.dst != s.src) settle(be, be.copy(st, s.dst, s.src, s.bytes, false));
        break;
      case Step::Kind::Accumulate:
        settle(be, be.reduce2(st, s.type, s.op, s.dst, s.dst, s.src, s.bytes / esize));
        break;
      case Step::Kind::Send: {
        PeerConnection* conn;
        NCCLCHECK(c_.connection(s.sendPeer, &conn));
        SendChannel* ch = conn->send();
        void* buf;
        size_t avail;
        if (!alignSend(ch)) return ch->acquire(&buf, &avail);  // surfaces a closed connection
        if (gate_.stamp()) {
          bool stamped;
          NCCLCHECK(gate_.send(ch, s.sendPeer, &stamped));
          if (!stamped) return ncclSuccess;
        }
        NCCLCHECK(ch->acquire(&buf, &avail));
        const size_t n = roundDown(std::min(avail, remaining), esize);
        if (n == 0) return ncclSuccess;
        settle(be, be.copy(st, buf, s.src + done_, n, false));
        ch->commit(n);
        done_ += n;
        *moved = true;
        return ncclSuccess;
      }
      case Step::Kind::Recv:
      case Step::Kind::RecvReduce: {
        PeerConnection* conn;
        NCCLCHECK(c_.connection(s.recvPeer, &conn));
        RecvChannel* ch = conn->recv();
        const void* buf;
        size_t avail;
        if (!alignRecv(ch)) return ch->peek(&buf, &avail);
        if (gate_.stamp()) {
          bool stamped;
          NCCLCHECK(gate_.recv(c_, ch, s.recvPeer, &stamped));
          if (!stamped) return ncclSuccess;
        }
        NCCLCHECK(ch->peek(&buf, &avail));
        const size_t n = roundDown(std::min(avail, remaining), esize);
        if (n == 0) return ncclSuccess;
        if (s.kind == Step::Kind::Recv) {
          if (s.dst) settle(be, be.copy(st, s.dst + done_, buf, n, s.streamDst));
        } else {
          const void* local = s.src + done_;
          settle(be, be.reduce2(st, s.type, s.op, s.dst + done_, s.recvFirst ? buf : local, s.recvFirst ? local : buf,
                                n / esize));
        }
        ch->release(n);
        done_ += n;
        *moved = true;
        return ncclSuccess;
      }
      default:
        WARN("rank %d: AllPairs direct call met a step it does not run (kind %d)", c_.rank, static_cast<int>(s.kind));
        return ncclInternalError;
    }
    done_ = s.bytes;  // local steps complete at once
    *moved = true;
    return ncclSuccess;
  }

  void finish() {
    if (op_.avg) settle(*c_.backend, c_.backend->divide(op_.stream, op_.type, op_.recvbuff, op_.recvbuff, c_.nranks,
                                                        op_.count));
    c_.inFlight.fetch_sub(1);
    c_.doneTicket.store(ticket_ + 1, std::memory_order_release);
    ringDoorbell(c_.bell());  // a work of another thread may wait for this ticket
  }

  // The executor finishes the op: planned as usual, its algorithm continued from this call's
  // step source at the step and byte this call reached (afresh when it never started).
  ncclResult_t handOver(int64_t budgetUsec, bool* done) {
    std::vector<std::unique_ptr<OpDesc>> ops;
    ops.push_back(std::make_unique<OpDesc>(op_));
    std::unique_ptr<CommWork> w;
    ncclResult_t res = planWork(std::move(ops), &w);
    if (res == ncclSuccess && (w->phases.size() != 1 || w->phases[0].size() != 1)) {
      WARN("rank %d: AllPairs direct call: the planned work has an unexpected shape", c_.rank);
      res = ncclInternalError;
    }
    if (res != ncclSuccess) {
      // Not expected for an op that qualified. Fail the communicator so that peers waiting on
      // this rank do not hang silently, and free its ticket.
      c_.fail(res, -1);
      c_.doneTicket.store(ticket_ + 1, std::memory_order_release);
      *done = true;
      return res;
    }
    w->ticket = ticket_;
    INFO(kSubsysColl, "rank %d: AllReduce of %zu bytes handed to the executor (%s)", c_.rank,
         op_.count * dev::typeSize(op_.type), src_ ? "waiting for a peer" : "the communicator was busy");
    if (src_)
      w->phases[0][0].resumeFirstSource(std::move(src_), hasCur_ ? &cur_ : nullptr, done_, sendAligned_, recvAligned_,
                                        gate_);
    handed_.push_back(std::move(w));
    return executeWorksFor(handed_, budgetUsec, done);
  }

  const OpDesc op_;  // the call's: a host stream runs the op after the call returned
  const uint64_t ticket_;
  Comm& c_;
  std::unique_ptr<StepSource> src_;
  bool streamDst_ = false;
  bool sourceDone_ = false;
  Step cur_;
  bool hasCur_ = false;
  size_t done_ = 0;
  bool sendAligned_ = false;
  bool recvAligned_ = false;
  StampGate gate_;  // this call's stamps to and from each peer
  std::vector<std::unique_ptr<CommWork>> handed_;  // the executor's work once handed over
};

}  // namespace

bool runAllPairsDirectly(OpDesc& op, ncclResult_t* res) {
  Comm& c = *op.comm;
  if (!qualifies(op, c, op.count * dev::typeSize(op.type))) return false;
  if (op.stream.kind == dev::StreamKind::Caller) {
    // Only on an idle communicator: the op takes the next ticket and runs at once, so issue
    // order is kept (a work queued by another thread meanwhile waits for this ticket).
    uint64_t ticket = c.doneTicket.load(std::memory_order_acquire);
    if (!c.issueTicket.compare_exchange_strong(ticket, ticket + 1, std::memory_order_acq_rel)) return false;
    PairsDirectOp direct(std::move(op), ticket);
    bool done = false;
    *res = direct.run(-1, &done);
    return true;
  }
  // A host stream: queued in issue order like any op (its ticket taken now); the stream
  // starts it on this thread when idle and its worker finishes what is left.
  const uint64_t ticket = c.issueTicket.fetch_add(1);
  const dev::StreamRef stream = op.stream;
  auto direct = std::make_shared<PairsDirectOp>(std::move(op), ticket);
  *res = enqueueResumableOn(*c.backend, stream, c.helperCpus,
                            [direct](int64_t budgetUsec, bool* done) { return direct->run(budgetUsec, done); });
  return true;
}

}  // namespace accl
