// backend.h: the torch.distributed backend "accl" (a c10d::Backend) over ACCL's NCCL API.
//
// Communicators: three for CPU tensors (created with the group, each served by an ACCL host
// stream): one for collectives, one for point-to-point ops, so that a send or receive waiting for
// its peer never holds up a collective behind it (isend then all_reduce on one rank, all_reduce
// then recv on its peer complete, as on gloo), and one for send/recv with a nonzero tag, matched
// by (peer, tag) as gloo does (tag_lane.h); each has its own completion thread.
// and one per GPU for CUDA tensors: for the current CUDA device when the group is created (if
// torch sees a GPU), for another device on its first collective there. Each op checks its
// tensors in the calling thread, stages what NCCL cannot use in place (non-contiguous tensors,
// PREMUL_SUM's scaling), and hands the NCCL calls to launch(), which runs them where the
// tensors live (host path / device path, see work.h). The collectives are in collectives.cc.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cstdint>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "library.h"
#include "nccl_types.h"
#include "send_ledger.h"
#include "streams.h"
#include "tag_lane.h"
#include "torch_compat.h"
#include "work.h"

namespace torch_accl {

// Where launch() runs an op's NCCL calls.
struct Target {
  ncclComm_t comm;
  cudaStream_t stream;  // an ACCL host stream (CPU tensors) or a CUDA stream (CUDA tensors)
};

class AcclBackend : public c10d::Backend, public WorkOwner {
 public:
  AcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout);
  ~AcclBackend() override;

  const std::string getBackendName() const override { return "accl"; }
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }
  void eagerConnectSingleDevice(at::Device device) override;
  // Stops the completion thread and watchdog, then destroys (or, after a failure, aborts) the
  // communicators. Idempotent: torch calls it on destroy_process_group, the destructor again.
  void shutdown() TORCH_ACCL_OVERRIDE_SINCE_2_15;

  // Coalescing (batch_isend_irecv, _coalescing_manager): the sends and receives issued between
  // start and end run as one NCCL group, so any order of them completes; endCoalescing returns
  // one Work for all of them (each op's own Work completes with it). torch 2.5 has no
  // supportsCoalescing() and issues a batch op by op; deferred point-to-point ops serve it.
  bool supportsCoalescing() const TORCH_ACCL_OVERRIDE_SINCE_2_15 { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  // A coalescing block that raised (torch's batch_isend_irecv never ends it then; torch_accl's
  // Python wrapper calls this): leaves coalescing and fails the ops it held, unstarted, with
  // `why`. Returns how many were dropped. The peers' matching ops fail by their own timeout.
  size_t abortCoalescing(const std::string& why);
  // gloo's semantics through the group's store: rank 0 waits for every rank (for the first that
  // does not arrive in time, or all of them with waitAllRanks), then releases them.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

  // WorkOwner
  std::string lastError() const override;
  void abortComm() override;
  std::string missingPeers(uint64_t seq) override;
  void checkDeviceComm(c10::Device device, const std::string& opName) override;
  void flushP2P() override;
  bool taggedHeld() const override { return tagLane_->held() > 0; }
  std::string dropHeld(const AcclWork* w) override;

  // ---- collectives.cc ----
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outSplits,
                                               std::vector<int64_t>& inSplits, const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // A communicator for CUDA tensors on one device, with its side stream.
  struct DeviceComm {
    ncclComm_t comm = nullptr;
    std::unique_ptr<SideStream> stream;
  };

  // Raises naming `what` unless r is success (or in progress).
  void check(ncclResult_t r, const char* what) const;
  void checkSingle(std::vector<at::Tensor>& tensors, const char* name) const;
  void checkRoot(int64_t root, const char* name) const;
  // host: a host-backend communicator (CPU tensors), whatever backend the library runs.
  ncclComm_t initComm(const std::string& key, bool host = false);
  // The communicator for CUDA tensors on `device`; created on a collective (all ranks take part).
  DeviceComm& deviceComm(c10::Device device, bool collective, const char* name);

  c10::intrusive_ptr<AcclWork> newWork(c10d::OpType type, const char* name, std::chrono::milliseconds timeout,
                                       const std::vector<at::Tensor>& outputs);
  // A contiguous buffer NCCL may read and write; copied back into t after the op if needed.
  at::Tensor stageInOut(at::Tensor& t, AcclWork& w);
  // Same, for a pure output (its old contents are not copied in).
  at::Tensor stageOut(const at::Tensor& t, AcclWork& w);
  void addCopyBack(AcclWork& w, at::Tensor dst, at::Tensor src);

  c10::intrusive_ptr<c10d::Work> allreduceImpl(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& rop,
                                               std::chrono::milliseconds timeout, const char* name, c10d::OpType type);
  c10::intrusive_ptr<c10d::Work> allgatherLists(std::vector<std::vector<at::Tensor>>& outputs,
                                                std::vector<at::Tensor>& inputs, std::chrono::milliseconds timeout,
                                                const char* name, c10d::OpType type);
  c10::intrusive_ptr<c10d::Work> allreduceSparse(at::Tensor& t, const c10d::AllreduceOptions& opts);
  c10::intrusive_ptr<c10d::Work> allreduceBitwise(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& rop,
                                                  std::chrono::milliseconds timeout, const char* name,
                                                  c10d::OpType type);
  void allGatherEach(const std::vector<at::Tensor>& ins, const std::vector<at::Tensor>& outs, const char* name,
                     const Target& t);
  c10::intrusive_ptr<c10d::Work> allgatherTensors(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                  std::chrono::milliseconds timeout, const char* name, c10d::OpType type);
  c10::intrusive_ptr<c10d::Work> reduceScatterTensors(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                      const c10d::ReduceOp& rop, std::chrono::milliseconds timeout,
                                                      const char* name, c10d::OpType type,
                                                      const std::vector<at::Tensor>& userOutputs);

  // Runs `body` (the op's NCCL calls) where the Work's tensors live, and completes the Work there.
  // Point-to-point ops pending (launchP2P) are started first, so ops start in call order.
  void launch(const c10::intrusive_ptr<AcclWork>& work, const std::function<void(const Target&)>& body);
  // A send or receive on CPU tensors (any op while coalescing) is held back and started with the
  // next ones as one NCCL group: when a Work of them is waited on or queried, before the next
  // other op, at endCoalescing, or once it has waited kP2PFlushAfter (a send nobody waits on).
  // So irecv-then-isend on both ranks completes, as on gloo. `body` must own what it uses.
  // anySource: a receive from any source (recvAnysource), whose peer is found (SendLedger) when
  // it is started; its body reads the peer from the Work (sourceRank()).
  void launchP2P(const c10::intrusive_ptr<AcclWork>& work, std::function<void(const Target&)> body,
                 bool anySource = false);
  // Starts what launchP2P holds (launchMu_ held); returns the Work that completes with it, or
  // null when nothing was held. A launch failure lands in the ops' Works (their wait() raises
  // it), and is raised here too with `raise`.
  c10::intrusive_ptr<AcclWork> flushPendingLocked(bool raise = false);
  std::optional<c10::Device> deviceOf(const AcclWork& work) const;
  // p2p: a send/receive (batch); on CPU tensors it runs on the point-to-point communicator.
  void launchLocked(const c10::intrusive_ptr<AcclWork>& work, const std::function<void(const Target&)>& body,
                    bool p2p = false);
  void launchDevice(const c10::intrusive_ptr<AcclWork>& work, c10::Device device,
                    const std::function<void(const Target&)>& body);
  // A send or receive with a nonzero tag on CPU tensors: held by the tag lane, started by the
  // next flush that can match it (flushTagsLocked).
  void launchTagged(TaggedOp op);
  // Starts what the tag lane can start now, as one NCCL group on its communicator (launchMu_
  // held; nothing while coalescing).
  void flushTagsLocked();
  // One per host stream: completes that stream's Works in order.
  enum class Lane { Coll, P2P, Tag };
  void launchOnLane(const c10::intrusive_ptr<AcclWork>& work, const std::function<void(const Target&)>& body,
                    Lane lane);
  void completionLoop(Lane lane);
  void watchdogLoop();

  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  ncclComm_t comm_ = nullptr;      // CPU tensors
  cudaStream_t stream_ = nullptr;  // its ACCL host stream
  ncclComm_t p2pComm_ = nullptr;      // CPU tensors, send/recv
  cudaStream_t p2pStream_ = nullptr;  // its ACCL host stream
  ncclComm_t tagComm_ = nullptr;      // CPU tensors, send/recv with a nonzero tag
  cudaStream_t tagStream_ = nullptr;  // its ACCL host stream
  std::unique_ptr<TagLane> tagLane_;  // under launchMu_
  std::vector<c10::intrusive_ptr<AcclWork>> batchTagged_;  // tagged ops of the open coalescing block
  std::map<c10::DeviceIndex, DeviceComm> deviceComms_;
  int deviceCommsCreated_ = 0;  // names each one's unique id in the store
  std::mutex launchMu_;         // one op enqueued at a time, in call order
  struct PendingOp {
    c10::intrusive_ptr<AcclWork> work;
    std::function<void(const Target&)> body;
    bool anySource = false;
  };
  std::vector<PendingOp> pending_;  // launchP2P, under launchMu_
  std::atomic<int64_t> pendingSince_{0};  // steady clock ticks of the oldest pending op; 0: none
  bool coalescing_ = false;
  std::unique_ptr<SendLedger> ledger_;  // receive from any source (CPU tensors)
  uint64_t monitoredBarriers_ = 0;
  std::mutex qmu_;
  std::condition_variable qcv_;   // completion thread: work queued / stopping
  std::condition_variable wdCv_;  // watchdog: stopping
  std::deque<c10::intrusive_ptr<AcclWork>> queue_;     // collectives' Works, launch order
  std::deque<c10::intrusive_ptr<AcclWork>> p2pQueue_;  // point-to-point Works, launch order
  std::deque<c10::intrusive_ptr<AcclWork>> tagQueue_;  // tagged point-to-point Works, launch order
  bool stopping_ = false;
  std::string firstError_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> failed_{false};
  std::thread completer_;
  std::thread p2pCompleter_;
  std::thread tagCompleter_;
  std::thread watchdog_;
  uint64_t seq_ = 0;
  uint64_t collSeq_ = 0;
  std::atomic<uint64_t> waitingSeq_{0};
  std::atomic<int64_t> waitingSince_{0};
};

c10::intrusive_ptr<c10d::Backend> createBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                double timeoutSec);

}  // namespace torch_accl
