// planner.h: turns one communicator's ops of a group into a CommWork: collectives in call
// order (chained in one lane, all-to-all in a phase of its own), then every send/receive of
// the group as one batch with a lane per peer and direction, so any call order of
// sends and receives completes. Every rank applies the same rule, so the byte streams
// between each pair of ranks agree.
#pragma once
#include <memory>
#include <vector>
#include "sched/work.h"

namespace accl {

// Whether the op's copies into its output use non-temporal stores (ACCL_STREAM_OUTPUT_BYTES).
bool streamsOutput(const OpDesc& op, int nranks);
// The arguments every algorithm of a collective op gets (buffers, count, type, ranks, piece).
CollArgs collArgsOf(const OpDesc& op, const Comm& c);

ncclResult_t planWork(std::vector<std::unique_ptr<OpDesc>> ops, std::unique_ptr<CommWork>* out);

}  // namespace accl
