// comm.h: the communicator. ncclComm (the public handle) owns a shared Comm; queued stream
// work holds its own reference, so destroy/abort never frees state a worker still uses.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include "bootstrap/bootstrap.h"
#include "comm/config.h"
#include "comm/realign_mailbox.h"
#include "device/backend.h"
#include "net/socket.h"
#include "coll/algo_policy.h"
#include "coll/proto_policy.h"
#include "topo/cpu_mask.h"
#include "topo/nic_choice.h"
#include "topo/rank_layout.h"
#include "transports/board.h"
#include "transports/doorbell.h"
#include "transports/peer_info.h"
#include "transports/setup.h"
#include "transports/transport.h"

namespace accl {

struct RedOpEntry {
  bool live = false;
  ncclDataType_t type = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  alignas(8) unsigned char scalar[8] = {};
  const void* deviceScalar = nullptr;
};

class ShmBoard;
class KernelPath;
class StagedPath;

class Comm {
 public:
  Comm();
  ~Comm();

  int rank = 0;
  int nranks = 0;
  int cudaDev = 0;
  Config config;
  // Memory, streams and data calls of this communicator (device/backend.h).
  std::shared_ptr<dev::Backend> backend = dev::processBackend();
  uint64_t nonce = 0;
  std::unique_ptr<Bootstrap> bootstrap;
  std::vector<PeerInfo> peers;
  std::vector<int> localRanks;  // global ranks on this host, ascending
  int localIndex = 0;
  // Host of every rank and the ring order that crosses each host boundary once (from init).
  topo::RankLayout layout;
  // The most ranks of this communicator on one OS kernel (netns pods or containers of one
  // machine count together) and the cores they run on: the tuner's cost model queues
  // messages sent at once by more ranks than there are cores (sched/cost_model.h).
  int kernelRanks = 0;
  int kernelCores = 0;
  // Transports in order of preference (src/comm/init.cc) and, by peer rank, the one chosen
  // for each peer (null for self). conns[p] is made when first used for lazy transports.
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<Transport*> peerTransport;
  std::vector<std::unique_ptr<PeerConnection>> conns;  // by peer rank; null for self or not yet made
  std::mutex connMu;  // guards making a connection against fail()/depart() walking them
  std::unique_ptr<ShmBoard> shmBoard;  // ShmDirect's memory when every rank is on this host
  Board board;  // ShmDirect's view of it (capacity 0: no board)
  // Collectives as kernels on the caller's stream (comm/kernel_path.h); null: not this comm.
  std::shared_ptr<KernelPath> kernelPath;
  // Collectives as staged kernels (comm/staged_path.h): device communicators too large for it.
  std::shared_ptr<StagedPath> stagedPath;
  size_t ringBytes = 1 << 20;  // capacity of each channel direction
  size_t pieceBytes = 128 << 10;  // pipelining piece of the ring algorithms (src/comm/init.cc)
  AlgoPolicy algoPolicy;
  ProtoPolicy protoPolicy;  // NCCL_PROTO: LL or Simple on the device path (sched/ll_collective.h)
  // Reductions fold in rank order (src/coll/rank_order_reduce.cc): ACCL_DETERMINISTIC at
  // init, ncclCommSetDeterministic later; read when a group is planned.
  std::atomic<bool> deterministic{false};
  // CPUs for this rank's helper threads (topo/thread_placement.h); empty: leave them alone.
  topo::CpuMask helperCpus;
  // Its GPU and NUMA node, for choosing the network device closest to it (topo/nic_choice.h).
  topo::RankLocality locality;
  Doorbell ownBell;  // this rank's doorbell unless a transport needs it in shared memory

  std::atomic<int> abortFlag{0};
  std::atomic<int> revoked{0};
  std::atomic<int> finalized{0};
  std::atomic<int> asyncError{ncclSuccess};
  mutable std::mutex causeMu;
  std::string cause;  // failureCause(); set once, by the first fail()
  std::atomic<int> initState{ncclSuccess};  // ncclInProgress while a non-blocking init runs
  // Ops are executed in issue order: a work runs only when doneTicket == its ticket.
  std::atomic<uint64_t> issueTicket{0};
  std::atomic<uint64_t> doneTicket{0};
  std::atomic<int> inFlight{0};
  // Collective calls issued so far: each call's stamp carries its number (sched/call_stamp.h).
  std::atomic<uint32_t> callSeq{0};
  // The thread inside a collective or point-to-point call of this communicator (0: none). NCCL
  // forbids two threads calling one communicator at once; a second one is refused (coll_api.cc).
  std::atomic<uintptr_t> callingThread{0};
  // Notes of a realignment after mismatched calls (sched/realign.h), filled by the status server.
  RealignMailbox realign;
  // [peer]: a later call's stamp this rank read in a call that then failed (sched/realign.h);
  // the next call's check takes it from here. Empty until the first one.
  struct StampPushback {
    bool held = false;
    unsigned char bytes[32] = {};
  };
  std::vector<StampPushback> stampPushback;

  std::mutex redOpMu;
  std::vector<RedOpEntry> redOps;  // handle = ncclNumOps + index

  // What this rank is blocked on, refreshed by the executor while it waits; served to peers
  // that ask for a hang summary (src/comm/status_server.h).
  std::mutex statusMu;
  std::string blockedReport;
  // What this rank has been blocked in for a while, for the wait-cycle check (sched/wait_cycle.h):
  // its call and how far its byte streams got ("" when not blocked). Served like blockedReport.
  std::string waitNote;
  // Rank 0's wait-cycle check (its executor only): when it last asked, and what it saw then.
  int64_t cyclePollUsec = 0;
  std::string cycleSeen;

  Doorbell* bell();
  // The connection to `peer`, made on first use (by the thread running this comm's work).
  ncclResult_t connection(int peer, PeerConnection** out) {
    if (PeerConnection* c = conns[peer].get()) {
      *out = c;
      return ncclSuccess;
    }
    return connectPeer(peer, out);
  }
  // Records the first asynchronous error and tears the transports down, so peers waiting
  // on this rank fail promptly instead of hanging.
  // `culprit`: the rank whose loss caused it, if known (-1 otherwise); it is logged here and
  // passed on to peers so every survivor can name it.
  void fail(ncclResult_t err, int culprit = -1);
  // Why the communicator failed, as first said (the precise WARN logged just before fail(), e.g.
  // the peer that destroyed its communicator or the rails that are all lost, rather than the
  // consequences logged after it): what ncclGetLastError(comm) returns once it failed.
  std::string failureCause() const;
  // Closes every connection so blocked waits return. `leaving` (ncclCommAbort): this rank is the
  // one that goes, and says so first (ring notice, board, shared-memory rings naming it), so
  // survivors blame it, not a neighbour that failed because of it.
  void closeTransports(bool leaving = false);
  // ncclCommDestroy, after this rank's work is done: tells every peer we left, so one still
  // waiting for us (in a call we never made) fails naming us rather than hanging.
  void depart();
  int localRankCount() const { return static_cast<int>(localRanks.size()); }
  // "rank 3 (host pod1, 10.77.2.2:41000, interface hpn0)", for error messages.
  std::string describePeer(int peer) const { return accl::describePeer(peers, peer); }
  // The view of this communicator a transport gets while it connects peers.
  TransportSetup transportSetup();

 private:
  ncclResult_t connectPeer(int peer, PeerConnection** out);
};

// Registry of live handles: lets every entry point reject destroyed or bogus communicators
// without dereferencing them.
void registerComm(ncclComm_t handle);
void unregisterComm(ncclComm_t handle);
// ncclInvalidArgument for NULL, ncclInvalidUsage for a handle that is not live.
ncclResult_t lookupComm(ncclComm_t handle, const char* fn, std::shared_ptr<Comm>* out);
// The same without a WARN: false when `handle` is no live communicator.
bool findLiveComm(ncclComm_t handle, std::shared_ptr<Comm>* out);
// Whether another rank of `c`'s communicator lives in this process (ncclCommInitAll, thread
// ranks): one thread may drive several of them, so no call may wait for the others outside
// the calls the application makes.
bool peerRankInThisProcess(const Comm& c);

}  // namespace accl

struct ncclComm {
  std::shared_ptr<accl::Comm> impl;
};
