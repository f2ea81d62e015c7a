#include "comm/kernel_path.h"
#include <signal.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <map>
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "comm/comm.h"
#include "comm/mps_probe.h"
#include "comm/staged_path.h"
#include "device/deferred_release.h"

namespace accl {
namespace {

// What every rank tells the others about its mailbox.
struct DeviceRecord {
  char busId[32];  // the rank's device
};

struct MailboxRecord {
  uint32_t ok;  // 1: every other rank's device is reachable, mailbox allocated and exported
  int32_t closeFd;  // the rank's CloseBoard in its process (-1: none)
  int32_t pid;
  uint64_t pidNs;
  uint64_t addr;  // in the owner's process
  dev::SharedHandle handle;
};

// Whether ranks a and b can only reach each other through a host transport, whatever their
// devices: on other hosts, or with NCCL_P2P_DISABLE=1.
bool hostTransportOnly(const Comm& c, int a, int b) {
  return param::p2pDisable() != 0 || c.peers[a].hostHash != c.peers[b].hostHash;
}

// Ranks of other processes on this rank's device time-slice it unless an MPS server runs: one
// INFO line (from the lowest rank of this process there) naming the fix.
void noteDeviceSharingWithoutMps(const Comm& c, int inProcess) {
  const PeerInfo& me = c.peers[c.rank];
  int onDevice = 0, lowestHere = c.rank;
  for (int r = 0; r < c.nranks; r++) {
    const PeerInfo& p = c.peers[r];
    if (p.hostHash != me.hostHash || p.deviceId != me.deviceId) continue;
    onDevice++;
    if (p.pid == me.pid && p.pidNs == me.pidNs) lowestHere = std::min(lowestHere, r);
  }
  if (onDevice == inProcess || lowestHere != c.rank || mpsControlSocketSeen()) return;
  INFO(kSubsysInit, "rank %d: %d rank(s) of this communicator in other processes share device %d with this process "
       "and no MPS server is seen (no control socket in %s): the device time-slices between the processes, slowing "
       "every collective; start one with `nvidia-cuda-mps-control -d` (docs/gpu.md)",
       c.rank, onDevice - inProcess, c.cudaDev, mpsPipeDirectory().c_str());
}

// A device communicator whose ranks do not all drive a device (a process on the host backend,
// ACCL_BACKEND=host, among CUDA ones): the first such rank, or -1.
int rankWithoutDevice(const Comm& c) {
  for (int r = 0; r < c.nranks; r++)
    if (c.peers[r].deviceId == 0) return r;
  return -1;
}

int maxConnections() {
  const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const int n = v ? std::atoi(v) : 0;
  return n > 0 ? n : 8;  // the driver's default
}

// Ranks of this process that share the device wait for each other's kernels, so those must
// run side by side: as many hardware queues as ranks.
ncclResult_t refuseQueueSharing(const Comm* c, int inProcess) {
  if (inProcess <= 1 || maxConnections() >= inProcess) return ncclSuccess;
  WARN("rank %d: %d ranks of this communicator drive device %d from this process, and their kernels wait for each "
       "other, so they must run side by side; CUDA_DEVICE_MAX_CONNECTIONS=%d gives the device's streams only %d "
       "hardware queue(s), where one rank's kernel can sit behind another's and never start. Set "
       "CUDA_DEVICE_MAX_CONNECTIONS to %d or more, or run one rank per process (docs/gpu.md, \"Several ranks on one "
       "GPU\")",
       c->rank, inProcess, c->cudaDev, maxConnections(), maxConnections(), inProcess);
  return ncclInvalidUsage;
}

// Mailboxes of the kernel-path ranks of this process, by (communicator, rank): how ranks of one
// process find each other's at init, to hold them (KernelPath::peerHolds_).
std::mutex gMailboxMu;
std::map<std::pair<uint64_t, int>, std::weak_ptr<dev::Buffer>>& processMailboxes() {
  static auto* m = new std::map<std::pair<uint64_t, int>, std::weak_ptr<dev::Buffer>>;
  return *m;
}

// An empty holder for this rank's mailbox (or launch counter) that keeps the rank's backend
// alive until it is freed: the last holder may be another rank of this process (peerHolds_,
// or a stream claim's probe) that outlives this communicator, and the buffer's deleter calls
// into the backend that allocated it.
std::shared_ptr<dev::Buffer> backendHeldBuffer(std::shared_ptr<dev::Backend> backend) {
  return std::shared_ptr<dev::Buffer>(new dev::Buffer(), [backend](dev::Buffer* b) { delete b; });
}

}  // namespace

KernelPath::~KernelPath() {
  stopWatching_ = true;
  if (watcher_.joinable()) watcher_.join();
  proxy_.reset();  // its thread writes into the proxy box
  {
    std::lock_guard<std::mutex> lk(gMailboxMu);
    processMailboxes().erase({nonce_, rank_});
  }
  const bool aborted = abortHost_ && *abortHost_ != 0;
  // Peers' mailboxes (and our own counters in them) are written by our kernels until the last
  // one has run: only then may anyone free them.
  if (!aborted && own_ && !lastLaunchDone(std::chrono::seconds(10)))
    INFO(kSubsysInit, "rank %d: ncclCommDestroy: this rank's last collective kernel has not run 10 s later; its "
         "mailbox and the ones of its peers it holds are left allocated", rank_);
  // Tell every other process we are done with its mailbox: on its close board once the mapping
  // is closed, or, where it has none, in the mailbox itself just before.
  if (!aborted)
    for (const auto& [r, pid] : otherProcesses_)
      if (!peerBoards_[r])
        backend_->fillDevice(base_[r] + offsetof(kern::MailboxHeader, closedBy) + rank_ * sizeof(uint64_t), 1,
                             sizeof(uint64_t));
  opened_.clear();
  if (!aborted)
    for (const auto& [r, pid] : otherProcesses_)
      if (peerBoards_[r]) peerBoards_[r]->markClosed(rank_);
  if (!own_ || own_->get() == nullptr) return;
  if (aborted) {
    // Kernels (ours, or a peer process's) may still be queued or running: the mailbox is freed
    // once the device lets it go (deferred_release.h), and only then the word they poll.
    auto own = std::move(own_);
    auto held = std::make_shared<std::vector<std::shared_ptr<dev::Buffer>>>(std::move(peerHolds_));
    auto box = std::make_shared<dev::Buffer>(std::move(proxyBox_));
    auto word = std::make_shared<dev::Buffer>(std::move(abortWord_));
    char* p = own->get();
    // The abort word and the proxy box are mapped host memory, whose free does not wait for the
    // device (cuMemFreeHost is not documented to): this rank's last kernel, which reads them
    // once its stream lets it start, must have run first.
    const LaunchMark last = order_.last();
    std::shared_ptr<dev::Backend> backend = backend_;
    dev::releaseLater(backend_, dev::Buffer(p, [own, held, box, word, last, backend](char*) mutable {
                        LaunchOrder::reached(*backend, last, std::chrono::milliseconds::max());
                        own.reset();
                        held.reset();
                        box.reset();
                        word.reset();
                      }));
    return;
  }
  if (!lastLaunchDone(std::chrono::milliseconds(0))) {
    new std::shared_ptr<dev::Buffer>(std::move(own_));  // deliberately never freed (INFO above)
    new std::vector<std::shared_ptr<dev::Buffer>>(std::move(peerHolds_));
    new dev::Buffer(std::move(abortWord_));  // the kernel reads both once it runs
    new dev::Buffer(std::move(proxyBox_));
    new std::shared_ptr<dev::Buffer>(std::move(doneWord_));  // and writes this when it ends
    return;
  }
  peerHolds_.clear();
  // Ours is freed once every process that mapped it has said it unmapped it (or has exited):
  // freeing exported memory that another process still has open is undefined behaviour.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    uint64_t closed[kern::kMailboxRanks] = {};
    if (backend_->readDevice(closed, own_->get() + offsetof(kern::MailboxHeader, closedBy), sizeof(closed)) !=
        ncclSuccess)
      break;
    bool all = true;
    for (const auto& [r, pid] : otherProcesses_)
      all = all && (closed[r] != 0 || (closeBoard_ && closeBoard_->closed(r)) ||
                    (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH));
    if (all) return;  // own_ is freed now, or by the last rank of this process that holds it
    if (std::chrono::steady_clock::now() >= deadline) {
      INFO(kSubsysInit, "rank %d: a peer process still maps this rank's collective mailbox 10 s after "
           "ncclCommDestroy (has it not destroyed its communicator?): its %zu bytes are left allocated",
           rank_, kern::mailboxBytes(nranks_));
      new std::shared_ptr<dev::Buffer>(std::move(own_));  // deliberately never freed
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void KernelPath::watchPeers(Comm* c) {
  std::vector<std::pair<int, pid_t>> others;  // rank, pid: peers in other processes of this pid namespace
  const PeerInfo& me = c->peers[c->rank];
  // Peers behind the network proxy are not watched: their connection tells the proxy.
  for (int r = 0; r < c->nranks; r++)
    if (c->peers[r].pid != me.pid && c->peers[r].pidNs == me.pidNs && !viaNet_[rank_][r])
      others.push_back({r, c->peers[r].pid});
  if (c->nranks < 2 || !c->bootstrap) return;
  // The comm outlives this thread: ~KernelPath (a member of it) joins it first.
  watcher_ = std::thread([this, c, others] {
    while (!stopWatching_.load()) {
      // A kernel that found a mismatch: every rank freezes at once (its waiting kernels give
      // up), not only at this rank's next call, which may come much later.
      if (reportCode() == kern::kReportMismatch && !frozen()) freeze(*c, mismatchText(*c), true);
      for (const auto& [rank, pid] : others) {
        if (kill(pid, 0) == 0 || errno != ESRCH) continue;
        if (c->asyncError.load() == ncclSuccess && c->abortFlag.load() == 0)
          WARN("rank %d: %s exited (process %d is gone) while this communicator runs collectives as kernels: "
               "waiting kernels give up and the communicator fails",
               c->rank, c->describePeer(rank).c_str(), static_cast<int>(pid));
        c->fail(ncclRemoteError, rank);
        return;
      }
      // A rank whose communicator failed (a mismatch its kernel saw, a lost peer, a timeout)
      // closes its bootstrap ring with a notice naming the cause. Its kernels have given up,
      // so kernels here that wait for its data (or for a rank that waits for it) never would:
      // fail too, which closes this rank's ring in turn, around the whole communicator.
      int culprit = -1;
      const int neighbour = c->bootstrap->closedNeighbour(&culprit);
      if (neighbour >= 0) {
        // This rank's own kernels may be about to find the cause themselves (a mismatch the
        // neighbour saw too: a kernel compares a waiting peer's call every 16 ms on a GPU,
        // up to ~130 ms apart on the emulated grid). Failing first would stop them and turn
        // the precise ncclInvalidUsage into a lost peer, so give them a moment: a kernel that
        // reports gives up, which ends this rank's last launch.
        lastLaunchDone(std::chrono::milliseconds(300));
        if (reportCode() == kern::kReportMismatch) {
          c->fail(ncclInvalidUsage);  // the next call (checkKernels) WARNs naming both calls
          return;
        }
        if (c->asyncError.load() == ncclSuccess && c->abortFlag.load() == 0)
          WARN("rank %d: %s closed its bootstrap connection (its communicator failed%s) while this communicator "
               "runs collectives as kernels: waiting kernels give up and the communicator fails",
               c->rank, c->describePeer(neighbour).c_str(),
               culprit >= 0 && culprit != neighbour ? (", naming rank " + std::to_string(culprit)).c_str() : "");
        c->fail(ncclRemoteError, culprit >= 0 ? culprit : neighbour);
        return;
      }
      for (int i = 0; i < 20 && !stopWatching_.load(); i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (reportCode() == kern::kReportMismatch && !frozen()) break;
      }
    }
  });
}

void KernelPath::stopKernels() {
  if (abortHost_) __atomic_store_n(abortHost_, 1, __ATOMIC_SEQ_CST);
}

void KernelPath::fillCommon(kern::CollKernelArgs* a) const {
  std::memset(a, 0, sizeof(*a));
  a->nranks = nranks_;
  for (int r = 0; r < nranks_; r++) {
    a->mailbox[r] = base_[r];
    for (int p = 0; p < nranks_; p++) a->viaNet[r][p] = viaNet_[r][p];
  }
  fillRank(a);
  a->abortFlag = abortDevice_;
  a->report = const_cast<uint64_t*>(abortDevice_) + 1;
  a->timeoutNs = static_cast<uint64_t>(std::max<int64_t>(0, param::timeoutSec())) * 1000000000ull;
}

bool KernelPath::allRanksInProcess() const {
  if (!otherProcesses_.empty() || proxy_) return false;
  for (int r = 0; r < nranks_; r++) {
    if (base_[r] == nullptr) return false;
    for (int p = 0; p < nranks_; p++)
      if (viaNet_[r][p]) return false;
  }
  return true;
}

bool KernelPath::allMailboxesReachable() const {
  for (int r = 0; r < nranks_; r++)
    for (int p = 0; p < nranks_; p++)
      if (viaNet_[r][p]) return false;
  for (int r = 0; r < nranks_; r++)
    if (base_[r] == nullptr) return false;
  return true;
}

void KernelPath::fillRank(kern::CollKernelArgs* a) const {
  // Another rank of this process (whose fillCommon made the table) may reach through its proxy
  // a peer whose mailbox this rank uses, or this rank itself.
  for (int r = 0; r < nranks_; r++)
    if (a->mailbox[r] == nullptr) a->mailbox[r] = base_[r];
  a->mailbox[rank_] = base_[rank_];
  a->proxyBox[rank_] = proxyDevice_;
}

void KernelPath::finishSends(Comm& c) {
  if (!proxy_) return;
  const int64_t t = param::timeoutSec();
  const auto limit = std::chrono::seconds(t > 0 ? t : 30);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  const LaunchMark last = order_.last();
  while (!LaunchOrder::passed(*backend_, last)) {
    if (c.asyncError.load() != ncclSuccess || c.abortFlag.load()) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      WARN("rank %d: ncclCommDestroy: this rank's last collective kernel has not finished after %lld s; its network "
           "proxy stops, and peers still waiting for its data will fail",
           rank_, static_cast<long long>(limit.count()));
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (!proxy_->drain(std::max(left, std::chrono::milliseconds(1))) && c.asyncError.load() == ncclSuccess &&
      !c.abortFlag.load())
    WARN("rank %d: ncclCommDestroy: the network proxy could not send all of this rank's collective data within %lld "
         "s; peers still waiting for it will fail",
         rank_, static_cast<long long>(limit.count()));
}

uint64_t KernelPath::reportCode() const {
  return abortHost_ ? __atomic_load_n(&abortHost_[1 + kern::kReportCode], __ATOMIC_ACQUIRE) : 0;
}

std::string KernelPath::mismatchText(const Comm& c) const {
  const uint64_t* report = abortHost_ + 1;
  const int rank = static_cast<int>(report[kern::kReportRank]) - 1;
  const int peer = static_cast<int>(report[kern::kReportPeer]);
  // Set by the first launch's checkKernels, before any kernel could report.
  std::string (*describe)(const void*) = describe_.load(std::memory_order_acquire);
  auto call = [&](int at) { return describe ? describe(&report[at]) : std::string("a call"); };
  return "mismatched calls: rank " + std::to_string(rank) + " is in " + call(kern::kReportMine) + " but the data " +
         (peer >= 0 && peer < c.nranks ? c.describePeer(peer) : std::string("?")) + " sent it is for " +
         call(kern::kReportTheirs);
}

ncclResult_t KernelPath::checkKernels(Comm& c, std::string (*describe)(const void* stamp)) {
  if (describe && !describe_.load(std::memory_order_relaxed)) describe_.store(describe, std::memory_order_release);
  const uint64_t* report = abortHost_ + 1;
  const uint64_t code = reportCode();
  if (code == kern::kReportMismatch && !frozen()) freeze(c, mismatchText(c), true);
  if (frozen()) return ncclInvalidUsage;
  if (code == 0) return ncclSuccess;
  std::lock_guard<std::mutex> lk(mu_);
  if (!reported_) {
    reported_ = true;
    const int rank = static_cast<int>(report[kern::kReportRank]) - 1;
    const int peer = static_cast<int>(report[kern::kReportPeer]);
    const char* what = "";
    switch (report[kern::kReportWhat]) {
      case kern::kWaitPeerData:
        what = "to send its data: it has not launched its side of the same call (a rank blocked in a call that waits "
               "for the whole device, such as cudaFree, cudaDeviceSynchronize or a synchronous copy, or busy on the "
               "host, never does; so does a rank that called something else)";
        break;
      case kern::kWaitPeerSpace: what = "to take the data sent to it: its side of the call stopped or never started"; break;
      case kern::kWaitOwnFold: what = "(its own reduction; internal error)"; break;
      case kern::kWaitOwnSend: what = "(its own send; internal error)"; break;
      case kern::kWaitOwnBlocks: what = "(its own blocks of one task; internal error)"; break;
    }
    const bool peerHere = peer >= 0 && peer < c.nranks && c.peers[peer].pid == c.peers[c.rank].pid;
    WARN("rank %d: ACCL_TIMEOUT=%lld s expired in a collective kernel: rank %d's kernel waited for %s%s %s (channel "
         "%llu, chunk %llu). The results of that call are not valid; the communicator has failed",
         c.rank, static_cast<long long>(param::timeoutSec()), rank,
         peer >= 0 && peer < c.nranks ? c.describePeer(peer).c_str() : "?",
         peerHere ? (" (a thread of this process, on CUDA device " + std::to_string(c.peers[peer].cudaDev) + ")").c_str()
                  : "",
         what, static_cast<unsigned long long>(report[kern::kReportChannel]),
         static_cast<unsigned long long>(report[kern::kReportChunk]));
  }
  c.fail(ncclRemoteError);
  return ncclRemoteError;
}

void KernelPath::orderAfterPrevious(dev::Backend& backend, const dev::StreamRef& s, bool capturing) {
  order_.orderAfterPrevious(backend, s, capturing);
}

bool KernelPath::lastLaunchDone(std::chrono::milliseconds limit) { return order_.lastDone(*backend_, limit); }

void KernelPath::markLaunched(const std::shared_ptr<void>& recorded, uint64_t streamId, bool capturing) {
  LaunchMark m;
  m.event = recorded;
  order_.markLaunched(m, streamId, capturing);
  if (proxy_ && !capturing) proxy_->wake();
}

void KernelPath::countLaunch(kern::LaunchDone* d, bool capturing) {
  if (capturing || !doneHost_) return;
  const uint64_t seq = launchSeq_.fetch_add(1, std::memory_order_relaxed) + 1;
  d->word[rank_] = doneDevice_;
  d->seq[rank_] = static_cast<uint32_t>(seq);
  if (d->ranks++ == 0) d->lead = rank_;
}

LaunchMark KernelPath::markCounted(uint64_t streamId, bool capturing) {
  const uint64_t seq = launchSeq_.load(std::memory_order_relaxed);
  if (capturing || !doneHost_ || markedSeq_.exchange(seq, std::memory_order_relaxed) == seq) return {};
  LaunchMark m;
  m.word = std::shared_ptr<const uint64_t>(doneWord_, doneHost_);
  m.deviceWord = doneDevice_;
  m.seq = seq;
  order_.markLaunched(m, streamId, false);
  if (proxy_) proxy_->wake();
  return m;
}

ncclResult_t KernelPath::staging(size_t bytes, bool capturing, char** out) {
  std::lock_guard<std::mutex> lk(mu_);
  if (bytes > stagingBytes_) {
    if (capturing) {
      WARN("rank %d: a captured send of %zu bytes overlaps a receive of the same group and needs staging memory, which "
           "cannot be allocated during a stream capture: run the same call once before capturing it",
           rank_, bytes);
      return ncclInvalidUsage;
    }
    void* p = nullptr;
    NCCLCHECK(backend_->memAlloc("send staging", &p, bytes));
    std::shared_ptr<dev::Backend> be = backend_;
    staging_.emplace_back(static_cast<char*>(p), [be](char* q) { be->memFree("send staging", q); });
    stagingBytes_ = bytes;
  }
  *out = staging_.back().get();
  return ncclSuccess;
}

ncclResult_t setUpKernelPath(Comm* c) {
  if (!c->backend->runsCollectiveKernels()) return ncclSuccess;  // host communicators
  if (const int r = rankWithoutDevice(*c); r >= 0) {
    WARN("rank %d: %s runs on host memory (the host backend) while this rank drives CUDA device %d: the ranks of a "
         "communicator must all use devices or all use host memory (ACCL_BACKEND, docs/backends.md)",
         c->rank, c->describePeer(r).c_str(), c->cudaDev);
    return ncclInvalidUsage;
  }
  const PeerInfo& me = c->peers[c->rank];
  int inProcess = 0;  // ranks of this process on this device
  for (const PeerInfo& p : c->peers) inProcess += p.pid == me.pid && p.pidNs == me.pidNs && p.deviceId == me.deviceId;
  NCCLCHECK(refuseQueueSharing(c, inProcess));
  noteDeviceSharingWithoutMps(*c, inProcess);
  // More ranks than the collective kernel's arguments and mailboxes hold: staged kernels.
  if (c->nranks > kern::kMailboxRanks) return StagedPath::setUp(c, &c->stagedPath);
  // Every launch of the ranks on this device (of every process) must be resident at once, as
  // their blocks wait for each other: a launch has at most kMaxTasks blocks.
  int onDevice = 0;
  for (const PeerInfo& p : c->peers) onDevice += p.hostHash == me.hostHash && p.deviceId == me.deviceId;
  const int resident = c->backend->residentCollectiveBlocks();
  if (resident > 0 && onDevice * kern::kMaxTasks > resident) {
    WARN("rank %d: %d ranks of this communicator share device %d, and the blocks of their collective kernels wait "
         "for each other, so all of them must be resident at once: up to %d blocks of %u threads per rank, %d in "
         "all, where the device holds %d. Run at most %d ranks of one communicator per GPU (docs/gpu.md, \"Several "
         "ranks on one GPU\")",
         c->rank, onDevice, c->cudaDev, kern::kMaxTasks, kern::kMaxCollThreads, onDevice * kern::kMaxTasks, resident,
         resident / kern::kMaxTasks);
    return ncclInvalidUsage;
  }

  auto kp = std::make_shared<KernelPath>();
  kp->backend_ = c->backend;
  kp->rank_ = c->rank;
  kp->nranks_ = c->nranks;
  kp->nonce_ = c->nonce;
  std::vector<MailboxRecord> recs(c->nranks);
  MailboxRecord& mine = recs[c->rank];
  mine = {};
  mine.closeFd = -1;
  kp->peerBoards_.resize(c->nranks);
  mine.pid = me.pid;
  mine.pidNs = me.pidNs;
  // Every rank's device, then whether this one reaches all of them (peer access).
  std::vector<DeviceRecord> devs(c->nranks);
  std::memset(devs.data(), 0, devs.size() * sizeof(DeviceRecord));
  c->backend->pciBusId(c->cudaDev).copy(devs[c->rank].busId, sizeof(devs[c->rank].busId) - 1);
  NCCLCHECK(c->bootstrap->allGather(devs.data(), sizeof(DeviceRecord)));
  // Which ranks' devices this rank's device reaches; a pair uses each other's mailboxes only
  // when both reach (every rank then decides the same from the gathered rows).
  const int n = c->nranks;
  std::vector<uint8_t> reach(static_cast<size_t>(n) * n, 0);
  std::string unreachable;
  for (int r = 0; r < n; r++) {
    if (hostTransportOnly(*c, c->rank, r)) continue;
    const bool sameProcess = c->peers[r].pid == me.pid && c->peers[r].pidNs == me.pidNs;
    std::string why;
    reach[static_cast<size_t>(c->rank) * n + r] = c->backend->reachDevice(devs[r].busId, sameProcess, &why) ? 1 : 0;
    if (!why.empty()) unreachable += (unreachable.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": " + why);
  }
  NCCLCHECK(c->bootstrap->allGather(reach.data(), static_cast<size_t>(n)));
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++)
      kp->viaNet_[a][b] = a != b && !(reach[static_cast<size_t>(a) * n + b] && reach[static_cast<size_t>(b) * n + a]);
  if (!unreachable.empty())
    INFO(kSubsysInit, "rank %d: %s: those peers are reached through the network proxy", c->rank, unreachable.c_str());
  std::vector<int> netPeers;
  bool transports = true;
  for (int r = 0; r < n; r++) {
    if (!kp->viaNet_[c->rank][r]) continue;
    netPeers.push_back(r);
    if (c->peerTransport[r] == nullptr) {
      INFO(kSubsysInit, "rank %d: no transport connects %s for the network proxy", c->rank, c->describePeer(r).c_str());
      transports = false;
    }
  }
  const size_t bytes = kern::mailboxBytes(c->nranks);
  void* abortDev = nullptr;
  if (!transports) {
    // mine.ok stays 0: every rank fails the set-up below (the INFO above says why)
  } else if (c->backend->allocShared(bytes, (kp->own_ = backendHeldBuffer(c->backend)).get(), &mine.handle) == ncclSuccess &&
      c->backend->allocMapped((1 + kern::kReportWords) * sizeof(uint64_t), &kp->abortWord_, &abortDev) == ncclSuccess) {
    mine.ok = 1;
    mine.addr = reinterpret_cast<uint64_t>(kp->own_->get());
    kp->closeBoard_ = CloseBoard::create();
    mine.closeFd = kp->closeBoard_ ? kp->closeBoard_->fd() : -1;
    std::lock_guard<std::mutex> lk(gMailboxMu);
    processMailboxes()[{c->nonce, c->rank}] = kp->own_;
    kp->abortHost_ = reinterpret_cast<uint64_t*>(kp->abortWord_.get());
    kp->abortDevice_ = static_cast<const uint64_t*>(abortDev);
    void* boxDev = nullptr;
    if (!netPeers.empty()) {
      if (c->backend->allocMapped(kern::proxyBoxBytes(c->nranks), &kp->proxyBox_, &boxDev) == ncclSuccess)
        kp->proxyDevice_ = static_cast<char*>(boxDev);
      else
        mine.ok = 0;
    }
  }
  NCCLCHECK(c->bootstrap->allGather(recs.data(), sizeof(MailboxRecord)));
  for (int r = 0; r < c->nranks; r++)
    if (!recs[r].ok) {
      WARN("rank %d: %s could not set up its collective mailbox, or has no transport to a peer it reaches through "
           "the network proxy (its log says which): this communicator cannot run its collectives",
           c->rank, c->describePeer(r).c_str());
      kp.reset();  // before the other ranks may free theirs: nothing of it was used
      return ncclSystemError;
    }
  for (int r = 0; r < c->nranks; r++) {
    if (kp->viaNet_[c->rank][r]) continue;  // no mailbox of its is used by this rank
    if (recs[r].pid == me.pid && recs[r].pidNs == me.pidNs) {
      kp->base_[r] = reinterpret_cast<char*>(recs[r].addr);
      if (r != c->rank) {
        std::lock_guard<std::mutex> lk(gMailboxMu);
        if (std::shared_ptr<dev::Buffer> b = processMailboxes()[{c->nonce, r}].lock()) kp->peerHolds_.push_back(b);
      }
      continue;
    }
    // The pid only where it names the process here (same pid namespace); 0: cannot tell.
    kp->otherProcesses_.push_back({r, recs[r].pidNs == me.pidNs ? recs[r].pid : 0});
    dev::Buffer b;
    if (c->backend->openShared(recs[r].handle, &b) != ncclSuccess) {
      WARN("rank %d: cannot map the collective mailbox of %s (CUDA IPC)", c->rank, c->describePeer(r).c_str());
      return ncclRemoteError;
    }
    kp->base_[r] = b.get();
    kp->opened_.push_back(std::move(b));
    if (recs[r].pidNs == me.pidNs) kp->peerBoards_[r] = CloseBoard::open(recs[r].pid, recs[r].closeFd);
  }
  // The launch counter (launch_order.h); without it, an event per call orders the launches.
  // Not for one rank: its all-reduce launches nothing (sched/one_rank_copy.h), and a stream
  // memory wait on a one-rank communicator's stream would act as a gate where no peer is waited
  // for (CudaBackend.MatrixOnOneRankRunsStraightOnTheUsersStream asserts none is queued).
  if (c->nranks > 1 && c->backend->waitsOnCounters()) {
    auto word = backendHeldBuffer(c->backend);
    void* dev = nullptr;
    if (c->backend->allocMapped(sizeof(uint64_t), word.get(), &dev) == ncclSuccess) {
      kp->doneWord_ = std::move(word);
      kp->doneHost_ = reinterpret_cast<const uint64_t*>(kp->doneWord_->get());
      kp->doneDevice_ = static_cast<uint64_t*>(dev);
    }
  }
  if (!netPeers.empty()) {
    kp->proxy_ = std::make_unique<NetProxy>(c, kp->proxyBox_.get(), netPeers);
    NCCLCHECK(kp->proxy_->start());
  }
  std::string via;
  for (int r : netPeers) via += (via.empty() ? "" : ", ") + std::to_string(r) + " via " + c->peerTransport[r]->name();
  INFO(kSubsysInit | kSubsysColl,
       "rank %d/%d: collectives run as kernels on the caller's stream (mailboxes of %zu bytes, %d ranks of this "
       "process on device %d; chunks of %zu bytes, %d in flight per channel, up to %u threads per block); %s%s",
       c->rank, c->nranks, bytes, inProcess, c->cudaDev, kern::kChunkBytes, kern::kSlots, kern::kMaxCollThreads,
       netPeers.empty() ? "no peer through the network proxy" : "network proxy for ranks ", via.c_str());
  if (param::checkMismatch() == 2)
    INFO(kSubsysInit | kSubsysColl,
         "rank %d: ACCL_CHECK_MISMATCH=2: the collective kernels check call stamps as with 1 (the full exchange "
         "before every call is made on the host path only)",
         c->rank);
  c->kernelPath = std::move(kp);
  c->kernelPath->watchPeers(c);
  return ncclSuccess;
}

}  // namespace accl
