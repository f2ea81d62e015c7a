// group.h: ncclGroupStart/End semantics. Calls inside a group (per thread, nestable) are
// recorded; the outermost end initialises deferred communicators concurrently, then plans
// and launches every recorded op: work the backend marks StreamKind::Caller (the host
// backend's NULL stream) runs in the calling thread, other work is queued on its stream by
// the communicator's backend. Outside a group each call is a group of one.
#pragma once
#include <functional>
#include <memory>
#include <utility>
#include "sched/op.h"

namespace accl {

ncclResult_t groupStart();
ncclResult_t groupEnd();
bool inGroup();
ncclResult_t enqueueOp(std::unique_ptr<OpDesc> op);
// Runs `init` now, or at the outermost group end (concurrently with the group's other inits).
ncclResult_t deferInit(std::function<ncclResult_t()> init);
// Moves a stream worker onto `cpus` when it is not there already (one syscall per change).
void placeStreamWorker(const topo::CpuMask& cpus);
// Queues `task` on `stream` (Backend::enqueueResumable: it may start on this thread when the
// stream is idle); the stream's worker, when it runs the rest, first moves onto `cpus` (the
// communicator's helper CPUs; empty: left where it is).
// A template, so the task and the placement make one std::function (one allocation) per op.
template <class Task>
ncclResult_t enqueueResumableOn(dev::Backend& backend, const dev::StreamRef& stream, const topo::CpuMask& cpus,
                                Task task) {
  return backend.enqueueResumable(stream, [cpus, task = std::move(task)](int64_t budgetUsec, bool* done) {
    if (budgetUsec < 0) placeStreamWorker(cpus);  // on the stream's thread, not the caller's
    return task(budgetUsec, done);
  });
}

}  // namespace accl
