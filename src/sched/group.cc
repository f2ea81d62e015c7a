#include "sched/group.h"
#include <unordered_map>
#include <algorithm>
#include <functional>
#include <thread>
#include <vector>
#include "base/check.h"
#include "sched/device_collective.h"
#include "sched/one_rank_copy.h"
#include "sched/staged_launch.h"
#include "sched/planner.h"
#include "sched/stream_claims.h"
#include "sched/work.h"

namespace accl {
namespace {

using OpBatches = std::vector<std::vector<std::unique_ptr<OpDesc>>>;

// Takes out of `byComm` the ops of communicators that `uses` says launch kernels of their own
// on Device streams, batched by (communicator, stream), in call order.
template <class Uses>
OpBatches takeDeviceBatches(OpBatches* byComm, Uses uses) {
  OpBatches batches;
  for (auto& commOps : *byComm) {
    if (commOps.empty() || !uses(*commOps.front()->comm) || commOps.front()->stream.kind != dev::StreamKind::Device)
      continue;
    auto it = std::find_if(batches.begin(), batches.end(), [&](const auto& b) {
      return b.front()->comm->nonce == commOps.front()->comm->nonce && b.front()->stream == commOps.front()->stream;
    });
    if (it == batches.end()) {
      batches.emplace_back();
      it = batches.end() - 1;
    }
    for (auto& op : commOps) it->push_back(std::move(op));
    commOps.clear();
  }
  byComm->erase(std::remove_if(byComm->begin(), byComm->end(), [](const auto& v) { return v.empty(); }), byComm->end());
  return batches;
}

struct GroupState {
  int depth = 0;
  std::vector<std::unique_ptr<OpDesc>> ops;
  std::vector<std::function<ncclResult_t()>> inits;
};
thread_local GroupState tGroup;

ncclResult_t runInits(std::vector<std::function<ncclResult_t()>> inits) {
  if (inits.empty()) return ncclSuccess;
  if (inits.size() == 1) return inits[0]();
  std::vector<ncclResult_t> results(inits.size(), ncclSuccess);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); i++) threads.emplace_back([&, i] { results[i] = inits[i](); });
  for (auto& t : threads) t.join();
  for (ncclResult_t r : results)
    if (r != ncclSuccess) return r;
  return ncclSuccess;
}

// Queues works on a host or Caller-kind stream as one resumable task: it may start on this
// thread when the stream is idle (Backend::enqueueResumable); its worker finishes the rest.
ncclResult_t enqueueResumableWorks(dev::Backend& backend, const dev::StreamRef& stream,
                                   std::shared_ptr<std::vector<std::unique_ptr<CommWork>>> works) {
  // A host stream's worker runs on the helper CPUs of the communicator it works for.
  topo::CpuMask cpus;
  if (stream.kind == dev::StreamKind::Host) cpus = works->front()->comm->helperCpus;
  return enqueueResumableOn(backend, stream, cpus, [works](int64_t budgetUsec, bool* done) {
    return executeWorksFor(*works, budgetUsec, done);
  });
}

ncclResult_t launch(std::vector<std::unique_ptr<OpDesc>> ops) {
  if (ops.empty()) return ncclSuccess;
  // One op run by this thread (the host NULL stream, outside a group): no stream to claim, to
  // queue on or to order after, so none of the sorting below; it costs a dozen allocations,
  // a third of a small op's time outside the transport.
  if (ops.size() == 1 && ops.front()->stream.kind == dev::StreamKind::Caller) {
    std::vector<std::unique_ptr<CommWork>> works(1);
    NCCLCHECK(planWork(std::move(ops), &works.front()));
    works.front()->ticket = works.front()->comm->issueTicket.fetch_add(1);
    return executeWorks(works);
  }
  // One op on an ACCL host stream: nothing to sort either, only the stream to queue on (it
  // may start here when the stream is idle), as the general path below would do.
  if (ops.size() == 1 && ops.front()->stream.kind == dev::StreamKind::Host) {
    const dev::StreamRef stream = ops.front()->stream;
    auto works = std::make_shared<std::vector<std::unique_ptr<CommWork>>>(1);
    NCCLCHECK(planWork(std::move(ops), &works->front()));
    CommWork& w = *works->front();
    w.ticket = w.comm->issueTicket.fetch_add(1);
    return enqueueResumableWorks(*w.comm->backend, stream, std::move(works));
  }
  // One-rank collectives on one device stream: a copy each (or nothing), no kernel, no claim.
  if (oneRankCopiesOnly(ops)) return launchOneRankCopies(ops);
  // Before anything is planned: refuses ranks that would wait for each other on one stream.
  // Refused calls never happened: they give back the call numbers their stamps took, or the
  // rank's next call would carry another number than its peers' (a false mismatch).
  std::vector<std::shared_ptr<StreamClaim>> claims;
  if (ncclResult_t r = claimDeviceStreams(ops, &claims); r != ncclSuccess) {
    for (const auto& op : ops)
      if (!op->isP2p() && op->stamp.magic == kCallStampMagic) op->comm->callSeq.fetch_sub(1, std::memory_order_relaxed);
    return r;
  }
  // Split by communicator, keeping call order within each.
  std::vector<std::vector<std::unique_ptr<OpDesc>>> byComm;
  for (auto& op : ops) {
    auto it = std::find_if(byComm.begin(), byComm.end(),
                           [&](const auto& v) { return v.front()->comm == op->comm; });
    if (it == byComm.end()) {
      byComm.emplace_back();
      it = byComm.end() - 1;
    }
    it->push_back(std::move(op));
  }
  std::vector<std::unique_ptr<CommWork>> works;
  std::vector<std::vector<dev::StreamRef>> extraStreams;
  // NCCL's execution model: launches on the caller's stream, queued right here, of the collective
  // kernel (comm/kernel_path.h) or, for communicators too large for it, of the staged kernel
  // (comm/staged_path.h). Ranks of one communicator that this thread queued on one stream go into
  // the same batch: the collective kernel carries them in the same launches (one after the
  // other, the first would wait for the second forever); the staged one refuses them.
  for (const bool staged : {false, true}) {
    OpBatches batches = takeDeviceBatches(
        &byComm, [staged](const Comm& c) { return staged ? c.stagedPath != nullptr : c.kernelPath != nullptr; });
    for (auto& b : batches) {
      const dev::StreamRef stream = b.front()->stream;
      dev::Backend& backend = *b.front()->comm->backend;
      std::function<bool()> launched;
      NCCLCHECK(staged ? launchStagedOps(std::move(b)) : launchKernelOps(std::move(b), &launched));
      // The stream stays claimed for these ranks until the device has run the launches (the
      // kernel path's launch counters or marker: nothing more queued per call).
      if (std::shared_ptr<StreamClaim> claim = findClaim(claims, backend.streamDomain(), stream.handle))
        holdClaimUntil(std::move(claim), staged ? backend.completionProbe(stream) : std::move(launched));
    }
  }
  // What is left runs on the host path: host communicators (every device communicator has
  // a kernel or staged path, set up at init).
  for (auto& commOps : byComm) {
    if (commOps.front()->stream.kind == dev::StreamKind::Device) {
      WARN("rank %d: a collective on device stream %p has neither kernel nor staged path (internal error)",
           commOps.front()->comm->rank, static_cast<void*>(commOps.front()->stream.handle));
      return ncclInternalError;
    }
    std::vector<dev::StreamRef> others = otherStreams(commOps);
    std::unique_ptr<CommWork> w;
    NCCLCHECK(planWork(std::move(commOps), &w));
    works.push_back(std::move(w));
    extraStreams.push_back(std::move(others));
  }
  // Tickets fix each communicator's execution order to the issue order.
  for (auto& w : works) w->ticket = w->comm->issueTicket.fetch_add(1);

  // Group by stream. What a stream means is the backend's: Caller works run here,
  // concurrently with the ones queued on streams.
  struct StreamBatch {
    dev::StreamRef stream;
    dev::Backend* backend;
    std::shared_ptr<std::vector<std::unique_ptr<CommWork>>> works;
  };
  std::vector<StreamBatch> byStream;
  std::vector<std::unique_ptr<CommWork>> inline_;
  struct Dependent {
    dev::Backend* backend;
    dev::StreamRef first;
    std::vector<dev::StreamRef> others;
  };
  std::vector<Dependent> dependents;
  for (size_t i = 0; i < works.size(); i++) {
    const dev::StreamRef s = works[i]->stream;
    dev::Backend* backend = works[i]->comm->backend.get();
    if (!extraStreams[i].empty()) dependents.push_back({backend, s, std::move(extraStreams[i])});
    if (s.kind == dev::StreamKind::Caller) {
      inline_.push_back(std::move(works[i]));
      continue;
    }
    // One group's works on one host stream run together, whichever of the stream's
    // communicators they belong to (one after the other, the first would wait for the second).
    auto it = std::find_if(byStream.begin(), byStream.end(),
                           [&](const StreamBatch& b) { return b.stream == s && b.backend == backend; });
    if (it == byStream.end()) {
      byStream.push_back({s, backend, std::make_shared<std::vector<std::unique_ptr<CommWork>>>()});
      it = byStream.end() - 1;
    }
    it->works->push_back(std::move(works[i]));
  }
  // A lone stream batch may start on this thread (Backend::enqueueResumable) when nothing
  // else of this launch must run here or be ordered after it.
  const bool mayStartHere = byStream.size() == 1 && inline_.empty() && dependents.empty();
  for (auto& b : byStream) {
    auto streamWorks = b.works;
    if (mayStartHere) {
      NCCLCHECK(enqueueResumableWorks(*b.backend, b.stream, std::move(streamWorks)));
      continue;
    }
    // A host stream's worker runs on the helper CPUs of the communicator it works for.
    topo::CpuMask cpus;
    if (b.stream.kind == dev::StreamKind::Host) cpus = streamWorks->front()->comm->helperCpus;
    NCCLCHECK(b.backend->enqueue(b.stream, [streamWorks, cpus]() {
      placeStreamWorker(cpus);
      return executeWorks(*streamWorks);
    }));
  }
  // Other streams used by a communicator's ops wait until its work has finished.
  for (auto& d : dependents) d.backend->orderAfter(d.first, d.others);
  if (!inline_.empty()) return executeWorks(inline_);
  return ncclSuccess;
}

// NCCL lets a group's sends and receives sit anywhere among its collectives, in a different
// place on each rank: they are stamped with the communicator's last collective before the
// group, which every rank agrees on, not with the one before them in this rank's call order.
void stampGroupSendsFromBeforeTheGroup(std::vector<std::unique_ptr<OpDesc>>& ops) {
  std::unordered_map<const Comm*, uint32_t> groupCollectives;
  for (const auto& op : ops)
    if (!op->isP2p() && op->stamp.magic == kCallStampMagic) groupCollectives[op->comm.get()]++;
  for (auto& op : ops)
    if (op->isP2p() && op->stamp.magic == kCallStampMagic)
      op->stamp.seq = op->comm->callSeq.load(std::memory_order_relaxed) - groupCollectives[op->comm.get()];
}

ncclResult_t flush() {
  auto inits = std::move(tGroup.inits);
  auto ops = std::move(tGroup.ops);
  stampGroupSendsFromBeforeTheGroup(ops);
  tGroup.inits.clear();
  tGroup.ops.clear();
  ncclResult_t initRes = runInits(std::move(inits));
  ncclResult_t opRes = launch(std::move(ops));
  return initRes != ncclSuccess ? initRes : opRes;
}

}  // namespace

void placeStreamWorker(const topo::CpuMask& cpus) {
  thread_local topo::CpuMask placed;
  if (cpus.empty() || cpus == placed) return;
  cpus.applyToCurrentThread();
  placed = cpus;
}

bool inGroup() { return tGroup.depth > 0; }

ncclResult_t groupStart() {
  tGroup.depth++;
  return ncclSuccess;
}

ncclResult_t groupEnd() {
  if (tGroup.depth == 0) {
    WARN("ncclGroupEnd: called without a matching ncclGroupStart");
    return ncclInvalidUsage;
  }
  if (--tGroup.depth > 0) return ncclSuccess;
  return flush();
}

ncclResult_t enqueueOp(std::unique_ptr<OpDesc> op) {
  if (tGroup.depth > 0) {
    tGroup.ops.push_back(std::move(op));
    return ncclSuccess;
  }
  std::vector<std::unique_ptr<OpDesc>> one;
  one.push_back(std::move(op));
  return launch(std::move(one));
}

ncclResult_t deferInit(std::function<ncclResult_t()> init) {
  if (tGroup.depth > 0) {
    tGroup.inits.push_back(std::move(init));
    return ncclSuccess;
  }
  return init();
}

}  // namespace accl
