// one_rank_copy.h: a one-rank communicator's collectives on a device stream need no kernel:
// out of place, the output is the input (one stream-ordered copy); in place, nothing at all.
// Only scaling (ncclPreMulSum) needs the kernel (ncclAvg over one rank divides by 1).
#pragma once
#include <memory>
#include <vector>
#include "sched/op.h"

namespace accl {

// Whether every op of `ops` is such a collective, all on one Device stream.
bool oneRankCopiesOnly(const std::vector<std::unique_ptr<OpDesc>>& ops);
// Queues them: one copy (cuMemcpyAsync) per out-of-place op on the caller's stream, nothing
// for an in-place one. No claim, event, memset or launch: the copy is the whole call.
ncclResult_t launchOneRankCopies(const std::vector<std::unique_ptr<OpDesc>>& ops);

}  // namespace accl
