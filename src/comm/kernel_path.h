// kernel_path.h: what a communicator needs to run its collectives as kernels on the caller's
// stream (kernels/collective_kernel.h), set up at init, outside any stream capture: every
// rank's mailbox mapped in this process (its own exported with CUDA IPC, the other processes'
// opened, the same process's used as they are) and a word of mapped host memory that makes
// waiting kernels give up when the communicator is aborted or fails.
//
// Used by every device communicator of at most kern::kMailboxRanks ranks (larger ones run the
// staged path, comm/staged_path.h). Ranks whose devices reach each other (the same device, or peer
// access both ways) use each other's mailboxes; peers on other hosts, every peer with
// NCCL_P2P_DISABLE=1, and ranks of this host on a device this rank's cannot reach are reached
// through the rank's network proxy (comm/net_proxy.h) over the transport init chose for them
// (shared memory on one host).
#pragma once
#include <cstdint>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "comm/close_board.h"
#include "comm/launch_order.h"
#include "comm/net_proxy.h"
#include "device/backend.h"

namespace accl {

class Comm;
struct RealignNote;

class KernelPath {
 public:
  ~KernelPath();
  // Makes waiting kernels of this rank give up (abort, a failed communicator).
  void stopKernels();
  // ncclRemoteError (WARNed once, the communicator failed) when a kernel of this rank gave
  // up after ACCL_TIMEOUT: its results are not valid, and the wait it gave up is named.
  // ncclInvalidUsage when a kernel found a peer's chunk stamped with another call than its own
  // (WARNed once naming both calls with `describe`), or a peer did: the communicator does not
  // fail, this rank freezes (comm/kernel_realign.cc) until its next call realigns the streams.
  ncclResult_t checkKernels(Comm& c, std::string (*describe)(const void* stamp));

  // Mismatched calls (comm/kernel_realign.cc). freeze: waiting kernels give up, no launch goes
  // to the device until this rank's next call has realigned every rank's streams, and calls
  // and ncclCommGetAsyncError say ncclInvalidUsage; `tellPeers`: this rank saw the mismatch
  // (`why`) and tells every other rank, through the status servers.
  void freeze(Comm& c, const std::string& why, bool tellPeers);
  bool frozen() const { return frozen_.load(std::memory_order_acquire); }
  // A realignment note from a peer (the status server's thread).
  void depositRealignNote(const RealignNote& note);
  // After a realignment, a collective call numbered up to the furthest call any rank had
  // numbered when it realigned fails at once (WARNed): so calls pair up by number again, as
  // they did before (ranks queue calls ahead, and each learned of the mismatch after another
  // number of them). `seq`: the highest call number of this rank's collectives in the launch.
  ncclResult_t admitCall(Comm& c, uint32_t seq);
  // ncclCommDestroy of a frozen communicator: the ranks waiting to realign with this one stop.
  void leaveFrozen(Comm& c);
  // Realigns the frozen communicators of one launch (every rank of each takes part, at its next
  // call): ncclInvalidUsage once done (the call that realigns fails, WARNed), another error
  // where it could not be done (the communicator then fails).
  friend ncclResult_t realignKernelPaths(const std::vector<Comm*>& comms);
  // A thread checks every 200 ms that the peers in other processes of this host whose mailbox
  // this rank uses are alive (peers behind the network proxy have a connection that says so),
  // and that no bootstrap ring neighbour has failed; either fails the communicator (kernels
  // give up) naming the rank. Started by setUpKernelPath.
  void watchPeers(Comm* c);
  // Whether every rank of the communicator is in this process and every pair reaches each
  // other's device memory: the direct path's condition (sched/direct_collective.h), the same on
  // every rank.
  bool allRanksInProcess() const;
  // Whether every pair of ranks reaches each other's mailbox (threads or processes of one
  // node, no network proxy): the LL path's condition (sched/ll_collective.h), the same on every
  // rank (viaNet_ is the whole communicator's).
  bool allMailboxesReachable() const;
  // The part of every launch's arguments that is the same for every call.
  void fillCommon(kern::CollKernelArgs* a) const;
  // What a launch carrying this rank's tasks needs of this rank (its mailbox and proxy box).
  void fillRank(kern::CollKernelArgs* a) const;
  // ncclCommDestroy, before the connections go: waits until this rank's last launch has run on
  // the device and its proxy has sent everything the kernels posted (a peer may still be
  // waiting for those bytes). WARNs and goes on after ACCL_TIMEOUT (30 s when unset).
  void finishSends(Comm& c);
  // Orders a launch on `s` after this rank's previous launches, whatever stream they were on (a
  // rank's launches must not overlap: they share its mailbox positions), and records, once the
  // launches are queued, where the next ones must wait. The previous stream itself is not kept:
  // it may be destroyed and its handle reused for another rank's stream.
  void orderAfterPrevious(dev::Backend& backend, const dev::StreamRef& s, bool capturing);
  // `recorded`: a marker recorded on the launch's stream after it (comm/launch_order.h).
  void markLaunched(const std::shared_ptr<void>& recorded, uint64_t streamId, bool capturing);
  // Whether this rank counts its launches in a word its kernels store when they end
  // (kernels/launch_done.h) rather than an event per call: where the backend can make a stream
  // wait for that word. Then each launch carrying tasks of this rank takes the next number
  // (countLaunch, nothing while capturing: a replay must not move the count back), and once a
  // call's launches are queued markCounted makes later ones wait for the last number taken; it
  // returns that mark (empty: no launch of this rank was counted in the call).
  bool countsLaunches() const { return doneHost_ != nullptr; }
  void countLaunch(kern::LaunchDone* d, bool capturing);
  LaunchMark markCounted(uint64_t streamId, bool capturing);
  // Waits (at most `limit`) until the device has run this rank's last uncaptured launch.
  bool lastLaunchDone(std::chrono::milliseconds limit);
  // Device memory of at least `bytes` for staging sends that a receive of the same launch
  // overwrites. Kept until the communicator goes (a captured graph may still read an older
  // one); grown only outside capture: a capturing caller that needs more gets an error.
  ncclResult_t staging(size_t bytes, bool capturing, char** out);

 private:
  // The kernels' report code (kern::kReportCode): 0 while no kernel gave up.
  uint64_t reportCode() const;
  // The WARN text of a mismatch a kernel of this rank reported.
  std::string mismatchText(const Comm& c) const;
  // Zeroes this rank's stream counters (its mailbox header, its proxy box) and the kernels'
  // report, once every rank's kernels have ended and its proxy has dropped what was in flight.
  ncclResult_t zeroStreams();
  friend ncclResult_t setUpKernelPath(Comm* c);
  std::shared_ptr<dev::Backend> backend_;
  int rank_ = 0, nranks_ = 0;
  uint64_t nonce_ = 0;  // the communicator's (Comm::nonce)
  // Declared before own_, so freed after it: cuMemFree of the mailbox waits for this rank's
  // kernels, which poll the word until they end.
  dev::Buffer abortWord_;             // mapped host memory
  dev::Buffer proxyBox_;              // mapped host memory: the proxy's slots (kern::ProxyHeader)
  // This rank's mailbox (exported). Ranks of this process hold each other's (peerHolds_) and let
  // go only once their own last launch has run, so the last of them frees it: a peer's kernel
  // on another device may still write its final counters into it after this rank is done.
  std::shared_ptr<dev::Buffer> own_;
  std::vector<std::shared_ptr<dev::Buffer>> peerHolds_;
  std::vector<dev::Buffer> opened_;   // other processes' mailboxes, mapped here
  char* base_[kern::kMailboxRanks] = {};
  char* proxyDevice_ = nullptr;                   // proxyBox_ as the device reaches it
  uint8_t viaNet_[kern::kMailboxRanks][kern::kMailboxRanks] = {};  // [a][b]: a reaches b through its proxy
  std::unique_ptr<NetProxy> proxy_;               // null: no such peer
  std::vector<std::pair<int, int>> otherProcesses_;  // rank, pid (0: another pid namespace): they map ours
  // Where the other processes say they unmapped ours (null: they write closedBy in it instead),
  // and their boards, where this rank says it unmapped theirs (by rank; null: closedBy).
  std::unique_ptr<CloseBoard> closeBoard_;
  std::vector<std::unique_ptr<CloseBoard>> peerBoards_;
  uint64_t* abortHost_ = nullptr;  // [0]: abort; [1..]: the kernels' report (kern::ReportWord)
  const uint64_t* abortDevice_ = nullptr;
  bool reported_ = false;
  std::thread watcher_;
  std::atomic<bool> stopWatching_{false};
  std::mutex mu_;
  LaunchOrder order_;
  // The launch counter (countsLaunches): mapped host memory, kept alive by the marks that
  // name it (a stream claim's probe may outlive the communicator).
  std::shared_ptr<dev::Buffer> doneWord_;
  const uint64_t* doneHost_ = nullptr;
  uint64_t* doneDevice_ = nullptr;
  std::atomic<uint64_t> launchSeq_{0};   // numbers taken by countLaunch
  std::atomic<uint64_t> markedSeq_{0};   // the last one markCounted marked
  std::vector<dev::Buffer> staging_;  // the last one is the current (largest)
  size_t stagingBytes_ = 0;
  // How a call stamp reads (sched/call_stamp.h, a layer above: handed in by checkKernels).
  std::atomic<std::string (*)(const void* stamp)> describe_{nullptr};
  // Realignment state (comm/kernel_realign.cc), under realignMu_.
  std::mutex realignMu_;
  std::atomic<bool> frozen_{false};
  uint64_t epoch_ = 0;       // realignments done; notes carry the one they belong to
  std::string frozenWhy_;    // the WARN of the rank that saw the mismatch
  bool earlyStop_ = false;   // a peer froze the next realignment before this one ended here
  std::string earlyWhy_;
  int goneRank_ = -1;        // a rank that destroyed its frozen communicator
  std::atomic<uint32_t> failThrough_{0};  // admitCall: calls numbered up to this one fail (0: none)
  bool failWarned_ = false;
  // [epoch]: the ready and zeroed notes so far, by rank (rank -1: none yet).
  std::map<uint64_t, std::vector<RealignNote>> readyNotes_, zeroedNotes_;
};

ncclResult_t realignKernelPaths(const std::vector<Comm*>& comms);

// Whether a status-server note belongs to a kernel-path realignment (KernelPath) rather than
// the host path's (comm/realign_mailbox.h).
bool isKernelRealignNote(const RealignNote& note);

// Collective over the communicator (every rank calls it after peer information is exchanged):
// for a device communicator sets c->kernelPath, or c->stagedPath past kern::kMailboxRanks
// ranks; nothing for a host one. An error (WARNed) where a rank cannot set its part up, where
// ranks mix devices and host memory, and for a set-up that would hang: ranks of this
// communicator in one process that share the device need as many hardware queues
// (CUDA_DEVICE_MAX_CONNECTIONS) as there are of them, so that their kernels run side by side.
ncclResult_t setUpKernelPath(Comm* c);

}  // namespace accl
