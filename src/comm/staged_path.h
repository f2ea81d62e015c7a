// staged_path.h: NCCL's execution model for device communicators the collective kernel cannot
// serve (more ranks than kern::kMailboxRanks). Every call is still one kernel launch on the
// caller's stream, queued at call time (kernels/staged_kernel.h); the kernel copies the call's
// data into the rank's staging box (pinned host memory mapped for the device), and the rank's
// staged proxy, a host thread that makes no device call, runs the collective on the box through
// a host communicator of the same ranks (a "shadow", made at init: shared memory, sockets, IB,
// with every algorithm and check of the host path), round by round; the kernel copies the
// results back. Nothing a kernel waits for is device work, so no stream can hang behind
// another, and a captured call replays: its description stays in the proxy's table.
//
// Slower than kernels moving data between devices (the bytes cross PCIe twice and the CPU
// reduces them): the price of serving any number of ranks with the same guarantees.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "comm/launch_order.h"
#include "device/backend.h"
#include "nccl.h"
#include "staged_args.h"

namespace accl {

class Comm;

// One collective (or send, or receive) of a call, as the proxy runs it on the shadow.
struct StagedOp {
  enum class Kind : uint8_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, Send, Recv };
  Kind kind = Kind::AllReduce;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;  // ncclSum..ncclAvg; PreMulSum: preMul
  bool preMul = false;
  bool deviceScalar = false;  // PreMulSum's scalar: the kernel copies it into the box header
  alignas(8) unsigned char scalar[8] = {};  // PreMulSum's host-immediate scalar
  int root = -1;  // rooted collectives: the root; Send/Recv: the peer
  int inSeg = -1, outSeg = -1;  // this rank's segments of the call (StagedCall::segs), -1: none
};

// A call: what the kernel moves (segs, the launch's arguments) and what the proxy runs.
struct StagedCall {
  std::vector<StagedOp> ops;
  std::vector<kern::StagedSegment> segs;
  uint32_t rounds = 0;
  bool captured = false;  // kept for every replay; others go after their last round
};

class StagedPath {
 public:
  ~StagedPath();
  // Sets up the shadow communicator, the box and the proxy (collective over the communicator,
  // at init, outside any capture).
  static ncclResult_t setUp(Comm* c, std::shared_ptr<StagedPath>* out);

  // Bytes of one piece per round: collectives split the box among their pieces; sends and
  // receives use a fixed size (both sides of a pair must cut alike) that leaves room for
  // maxP2pOps() of them.
  size_t roundBytesFor(size_t piecesPerRound, size_t elemSize) const;
  size_t p2pRoundBytes() const;
  int maxP2pOps() const;
  // Records the call, fills the launch's arguments (its number, box, words) and wakes the proxy.
  void addCall(StagedCall call, kern::StagedArgs* args);
  void orderAfterPrevious(dev::Backend& backend, const dev::StreamRef& s, bool capturing) {
    order_.orderAfterPrevious(backend, s, capturing);
  }
  void markLaunched(dev::Backend& backend, const dev::StreamRef& s, bool capturing);
  // Makes waiting kernels give up (abort, a failed communicator).
  void stopKernels();
  // ncclRemoteError (WARNed once; the communicator failed) when a kernel gave up after ACCL_TIMEOUT.
  ncclResult_t checkKernels(Comm& c);
  // ncclCommDestroy: waits (ACCL_TIMEOUT, 30 s when unset) until the device has run this rank's
  // last launch; the proxy serves its rounds meanwhile.
  void finish(Comm& c);
  int rank() const { return rank_; }

 private:
  void run();
  ncclResult_t runRound(uint64_t call, uint64_t round);

  Comm* c_ = nullptr;
  std::shared_ptr<dev::Backend> backend_;
  int rank_ = 0, nranks_ = 0;
  ncclComm_t shadow_ = nullptr;  // the host communicator of the same ranks
  dev::Buffer abortWord_;        // mapped: [0] abort, [1..] the kernel's report
  uint64_t* abortHost_ = nullptr;
  const uint64_t* abortDevice_ = nullptr;
  dev::Buffer box_;              // mapped: kern::StagedBoxHeader, then the data area
  char* boxDevice_ = nullptr;
  kern::StagedBoxHeader* header_ = nullptr;
  LaunchOrder order_;
  std::mutex mu_;
  std::map<uint64_t, StagedCall> calls_;
  uint64_t nextCall_ = 1;
  bool reported_ = false;
  std::thread proxy_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> wakes_{0};
};

}  // namespace accl
