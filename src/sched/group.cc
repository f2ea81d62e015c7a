#include "sched/group.h"
#include <algorithm>
#include <thread>
#include <vector>
#include "base/check.h"
#include "sched/planner.h"
#include "sched/work.h"

namespace accl {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<std::unique_ptr<OpDesc>> ops;
  std::vector<std::function<ncclResult_t()>> inits;
};
thread_local GroupState tGroup;

// Moves a stream worker onto `cpus` when it is not there already (one syscall per change).
void placeStreamWorker(const topo::CpuMask& cpus) {
  thread_local topo::CpuMask placed;
  if (cpus.empty() || cpus == placed) return;
  cpus.applyToCurrentThread();
  placed = cpus;
}

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

ncclResult_t launch(std::vector<std::unique_ptr<OpDesc>> ops) {
  if (ops.empty()) return ncclSuccess;
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
  for (auto& commOps : byComm) {
    std::vector<dev::StreamRef> others;
    const dev::StreamRef first = commOps.front()->stream;
    for (auto& op : commOps)
      if (!(op->stream == first) && std::find(others.begin(), others.end(), op->stream) == others.end())
        others.push_back(op->stream);
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
    // A host stream's worker runs on the helper CPUs of the communicator it works for.
    topo::CpuMask cpus;
    if (b.stream.kind == dev::StreamKind::Host) cpus = streamWorks->front()->comm->helperCpus;
    if (mayStartHere) {
      b.backend->enqueueResumable(b.stream, [streamWorks, cpus](int64_t budgetUsec, bool* done) {
        if (budgetUsec < 0) placeStreamWorker(cpus);  // on the stream's thread, not the caller's
        return executeWorksFor(*streamWorks, budgetUsec, done);
      });
      continue;
    }
    b.backend->enqueue(b.stream, [streamWorks, cpus]() {
      placeStreamWorker(cpus);
      return executeWorks(*streamWorks);
    });
  }
  // Other streams used by a communicator's ops wait until its work has finished.
  for (auto& d : dependents) d.backend->orderAfter(d.first, d.others);
  if (!inline_.empty()) return executeWorks(inline_);
  return ncclSuccess;
}

ncclResult_t flush() {
  auto inits = std::move(tGroup.inits);
  auto ops = std::move(tGroup.ops);
  tGroup.inits.clear();
  tGroup.ops.clear();
  ncclResult_t initRes = runInits(std::move(inits));
  ncclResult_t opRes = launch(std::move(ops));
  return initRes != ncclSuccess ? initRes : opRes;
}

}  // namespace

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
