// work.h: what the executor runs. A CommWork is one communicator's share of a group: a
// list of phases run one after another; the lanes of a phase run concurrently (a p2p batch
// has one lane per peer and direction; a collective has one lane).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "coll/step.h"
#include "comm/comm.h"
#include "sched/call_stamp.h"
#include "sched/mismatch_check.h"
#include "sched/op.h"

namespace accl {

// Every step starts its bytes at a 16-byte boundary of a connection's stream, so received
// data can be reduced in place with aligned element access. Both ends pad identically
// (Lane, and the AllPairs direct call, sched/pairs_fast_path.cc).
constexpr uint64_t kStreamAlign = 16;
// Pads a connection's stream to kStreamAlign before a step's bytes: true once aligned, false
// while the send channel has no room for the padding or the padding has not arrived yet.
bool padSendStream(SendChannel* ch);
bool padRecvStream(RecvChannel* ch);

class Lane {
 public:
  // streamDst: the source belongs to an op whose output is too large to stay in cache, so
  // its copies into the output bypass the cache.
  void add(std::unique_ptr<StepSource> src, bool streamDst = false) {
    if (sources_.empty()) sources_.reserve(4);  // a collective's: [pre-scale] algorithm [average]
    sources_.push_back(std::move(src));
    streamDst_.push_back(streamDst);
    stamps_.push_back(nextStamp_);
  }
  // The call whose stamp the sources added from now on send and check (null: none).
  void stampNext(const CallStamp* stamp) { nextStamp_ = stamp; }
  bool empty() const { return sources_.empty(); }

  // Moves as far as the channels and the backend allow; data calls are queued on `stream`
  // with comm.backend. *progressed is set when anything moved.
  ncclResult_t advance(Comm& comm, const dev::StreamRef& stream, bool* progressed);
  bool finished() const { return finished_; }
  // The call whose stamps the current step sends and checks (null: none), and whether it has
  // read any of `peer`'s yet.
  const CallStamp* stamp() const { return gate_.stamp(); }
  bool stampReceivedFrom(int peer) const { return gate_.receivedFrom(peer); }
  // Where this lane's first stamp to `peer` began in the stream (~0: none sent yet).
  uint64_t firstStampSentAt(int peer) const { return gate_.firstSentAt(peer); }
  // After a realignment the lane carries on from: an earlier call's stamp it read is
  // forgotten and the stream is padded again before the real one (sched/realign.h).
  void afterRealign() {
    if (gate_.forgetStale()) recvAligned_ = false;
  }
  // The direct path (board_fast_path.h) began this lane's first board step: it posted board
  // operation `seq` and took the posts of ranks below `next`; the step carries on from there.
  void resumeBoardStep(uint64_t seq, int next) {
    resumeSeq_ = seq;
    resumeNext_ = next;
  }
  // The AllPairs direct path (pairs_fast_path.h) ran the first steps of this lane's first
  // source (the same algorithm, made with the same arguments): the lane carries on with that
  // source object, inside step `cur` (null: between steps) at `done` bytes, with the padding
  // in front of it already sent/skipped as the flags say.
  void resumeFirstSource(std::unique_ptr<StepSource> src, const Step* cur, size_t done, bool sendAligned,
                         bool recvAligned, const StampGate& gate) {
    sources_[0] = std::move(src);
    gate_ = gate;  // the stamps it sent and checked, for the same call as the planned op's
    for (auto& st : stamps_)
      if (st == stamps_.front() && &st != &stamps_.front()) st = gate.stamp();
    stamps_[0] = gate.stamp();
    if (!cur) return;
    cur_ = *cur;
    cur_.streamDst = cur_.streamDst || streamDst_[0];
    hasCur_ = true;
    done_ = done;
    sendAligned_ = sendAligned;
    recvAligned_ = recvAligned;
  }
  // For hang reports: the step this lane waits on, how far it got, and for whom it waits
  // (-1 when not waiting on that direction).
  const Step* current() const { return hasCur_ ? &cur_ : nullptr; }
  size_t currentDone() const { return done_; }
  int waitingRecvFrom() const { return waitRecv_; }
  int waitingSendTo() const { return waitSend_; }
  // The backend work this lane waits for before it can commit or release ring space.
  bool waitingOnDevice() const { return inFlight_.active; }
  dev::Fence deviceFence() const { return inFlight_.fence; }

 private:
  enum class StepState { Blocked, Moved, Done };
  ncclResult_t runStep(Comm& comm, const dev::StreamRef& stream, StepState* state);
  // Ring space and progress of a data call are settled only when its fence completes: until
  // then the sender must not see the space as free, nor the receiver see bytes as arrived.
  struct InFlight {
    bool active = false;
    dev::Fence fence;
    RecvChannel* in = nullptr;   // released by n when done
    SendChannel* out = nullptr;  // committed by n when done
    size_t n = 0;
  };
  StepState settle(dev::Backend& backend, const InFlight& f);
  void finish(const InFlight& f);
  ncclResult_t runBoardStep(Comm& comm, StepState* state);  // lane_board.cc
  ncclResult_t runBoardReadStep(Comm& comm, StepState* state);  // lane_board_read.cc
  ncclResult_t runBoardSliceStep(Comm& comm, StepState* state);  // lane_board_slices.cc
  // Board steps waiting for `peer`'s part of the current board operation (`what`: its input,
  // its reduced slice): an error, with the cause logged, once it can never come. A peer that
  // destroyed its communicator may have posted just before: the first time its departure is
  // seen, *recheck is set instead (the caller looks once more), and only the second is an error.
  ncclResult_t checkBoardPeer(Comm& comm, int peer, const char* what, bool* recheck);
  // ncclInvalidUsage (WARNed) when `peer`'s board post is for another call than ours.
  ncclResult_t checkBoardStamp(Comm& comm, int peer, const CallStamp& theirs);
  bool alignSend(SendChannel* ch);
  bool alignRecv(RecvChannel* ch);
  // RecvCopySend into host memory: each piece received is copied to dst once and lent to
  // `out` from there (rather than copied to dst and to out's ring).
  ncclResult_t runLentForward(dev::Backend& be, const dev::StreamRef& stream, RecvChannel* in, SendChannel* out,
                              StepState* state);

  std::vector<std::unique_ptr<StepSource>> sources_;
  std::vector<bool> streamDst_;
  std::vector<const CallStamp*> stamps_;  // [source]: its call's stamp (null: none)
  const CallStamp* nextStamp_ = nullptr;
  StampGate gate_;  // the current source's stamps, per peer
  // Stamps of the current source's call to/from the step's peers: *ready once both are done.
  ncclResult_t stampPeers(Comm& comm, SendChannel* out, RecvChannel* in, bool* ready);
  size_t sourceIdx_ = 0;
  Step cur_;
  bool hasCur_ = false;
  bool finished_ = false;
  size_t done_ = 0;
  bool sendAligned_ = false;
  bool recvAligned_ = false;
  // Send steps from host memory: the transport reads the step's source itself (lend); the
  // step ends once the transport has handed stream position lentEnd_ on (0: not lent).
  uint64_t lentEnd_ = 0;
  int waitRecv_ = -1;
  int waitSend_ = -1;
  int departedSeen_ = -1;  // checkBoardPeer: the peer whose departure was seen once
  InFlight inFlight_;
  uint64_t boardSeq_ = 0;  // board steps: the sequence number posted (0: not posted yet)
  int boardNext_ = 0;      // board steps: the next rank whose post to consume
  bool boardRead_ = false; // in-place read steps: every input read, this rank's readDone published
  bool boardSliced_ = false;  // sliced steps: this rank's slice of the chunk reduced and published
  uint64_t resumeSeq_ = 0;  // resumeBoardStep(): where the first board step starts (0: afresh)
  int resumeNext_ = 0;
};

struct CommWork {
  std::shared_ptr<Comm> comm;
  uint64_t ticket = 0;
  std::vector<std::vector<Lane>> phases;
  size_t phase = 0;
  bool started = false;
  bool finished = false;
  ncclResult_t result = ncclSuccess;
  std::vector<std::unique_ptr<OpDesc>> ops;            // steps point into these (scalars)
  std::vector<dev::Buffer> scratch;                    // pre-scaled PreMulSum inputs, staged sends
  dev::StreamRef stream;                               // where its data calls are queued
  int64_t lastProgressUsec = 0;  // steady-clock time of the last step that moved
  int64_t startUsec = 0;         // when the work got its turn (for ACCL_TRACE_FILE)
  bool hangReported = false;
  // ACCL_CHECK_MISMATCH (sched/mismatch_check.h): phase 0 all-gathers every rank's call
  // fingerprint (slots 0..nranks-1; this rank's own is also at [nranks]); the executor
  // compares them before phase 1 moves any data.
  std::unique_ptr<Fingerprint[]> fingerprints;
  std::string p2pMismatch;  // a checked receive got another size than posted (not fatal)
  std::string p2pBroken;    // a checked receive found no header (fatal: stream not trusted)
  int skippedBy = -1;  // checkStrayStamps: a peer seen in a later call while we wait for its bytes
  // c.board.posted before this work's board operations (~0: set when the work starts).
  uint64_t boardAtStart = ~uint64_t(0);
};

// One block describing where `w` is stuck (for ACCL_HANG_WARN, ACCL_TIMEOUT, abort, SIGUSR1).
std::string hangReport(const CommWork& w, int64_t nowUsec);
// While `w` is blocked: fails it with ncclInvalidUsage (WARNed, the communicator failed) when
// a peer sent this rank a call it is not in, on a connection or the board, that no step of
// the current phase will read (a collective of another algorithm, a call missing on one
// rank): what would otherwise wait forever (sched/stamp_scan.cc).
ncclResult_t checkStrayStamps(CommWork& w);
// Incremented by SIGUSR1 (ACCL_HANG_REPORT=1); blocked executors print a report when it changes.
uint64_t hangReportRequests();
void installHangReportSignal();

// Runs all works to completion (or failure) in the calling thread, interleaving them so no
// work waits on another. Returns the first error.
ncclResult_t executeWorks(std::vector<std::unique_ptr<CommWork>>& works);
// The same, but gives up once it has waited budgetUsec (>= 0) without progress, leaving
// *done false; the works keep their state, so a later call carries on where this one stopped.
ncclResult_t executeWorksFor(std::vector<std::unique_ptr<CommWork>>& works, int64_t budgetUsec, bool* done);

}  // namespace accl
