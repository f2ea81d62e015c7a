#include "sched/group.h"
#include <algorithm>
#include <thread>
#include <vector>
#include "base/check.h"
#include "sched/planner.h"
#include "sched/stream.h"
#include "sched/work.h"

namespace accl {
namespace {

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
  std::vector<std::vector<cudaStream_t>> extraStreams;
  for (auto& commOps : byComm) {
    std::vector<cudaStream_t> others;
    cudaStream_t first = commOps.front()->stream;
    for (auto& op : commOps)
      if (op->stream != first && std::find(others.begin(), others.end(), op->stream) == others.end())
        others.push_back(op->stream);
    std::unique_ptr<CommWork> w;
    NCCLCHECK(planWork(std::move(commOps), &w));
    works.push_back(std::move(w));
    extraStreams.push_back(std::move(others));
  }
  // Tickets fix each communicator's execution order to the issue order.
  for (auto& w : works) w->ticket = w->comm->issueTicket.fetch_add(1);

  // Group by stream; NULL-stream works run here, concurrently with the queued ones.
  std::vector<std::pair<cudaStream_t, std::shared_ptr<std::vector<std::unique_ptr<CommWork>>>>> byStream;
  std::vector<std::unique_ptr<CommWork>> inline_;
  std::vector<std::pair<HostStream*, std::vector<cudaStream_t>>> dependents;
  for (size_t i = 0; i < works.size(); i++) {
    cudaStream_t s = works[i]->ops.front()->stream;
    HostStream* hs = s ? lookupHostStream(s) : nullptr;
    if (hs && !extraStreams[i].empty()) dependents.emplace_back(hs, std::move(extraStreams[i]));
    if (!s) {
      inline_.push_back(std::move(works[i]));
      continue;
    }
    auto it = std::find_if(byStream.begin(), byStream.end(), [&](const auto& p) { return p.first == s; });
    if (it == byStream.end()) {
      byStream.emplace_back(s, std::make_shared<std::vector<std::unique_ptr<CommWork>>>());
      it = byStream.end() - 1;
    }
    it->second->push_back(std::move(works[i]));
  }
  for (auto& [s, streamWorks] : byStream) {
    lookupHostStream(s)->enqueue([streamWorks]() { return executeWorks(*streamWorks); });
  }
  // Other streams used by a communicator's ops wait until its work has finished.
  for (auto& [hs, others] : dependents) {
    auto ev = std::make_shared<HostEvent>();  // shared: each waiting stream keeps it alive
    ev->record(hs);
    for (cudaStream_t other : others) {
      if (HostStream* os = other ? lookupHostStream(other) : nullptr) {
        ev->makeWait(os);
        os->enqueue([ev] { return ncclSuccess; });
      }
    }
  }
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
