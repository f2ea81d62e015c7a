// direct_collective.h: the direct path (kernels/direct_kernel.h): ranks of one process whose
// devices reach each other run large collectives (all-reduce, all-gather, reduce-scatter,
// broadcast, reduce) on each other's user buffers in place, with no mailbox slot in between. Which path a call takes is decided from what every rank shares
// (the op, its size, the communicator's placement), so all ranks of a call take the same one.
#pragma once
#include <cstddef>
#include <optional>
#include <vector>
#include "direct_args.h"
#include "sched/op.h"

namespace accl {

class KernelPath;

// The direct (and LL) kernels' kind for a collective kind; none for the others.
std::optional<kern::DirectKind> directKindOf(OpKind k);

// The call's largest buffer: what nccl-tests calls its size, the same on every rank of a
// matched call (all-gather's output, reduce-scatter's input: nranks x count).
size_t callBytes(const OpDesc& op);

// The arguments of one direct or LL launch for `ops` (collective j of every rank it carries;
// kernel addresses resolved), blocksPerRank left to the caller; ncclInvalidUsage (WARNed) when
// one thread queued ranks of one communicator in one group with calls that differ.
ncclResult_t buildDirectArgs(const std::vector<OpDesc*>& ops, kern::DirectArgs* a);

// Whether `op` (a collective of a communicator with a kernel path) runs on the direct path.
bool directEligible(const OpDesc& op, const KernelPath& kp);

// Launches one direct kernel on `stream` for `ops` (collective j of every rank this launch
// carries; each directEligible; kernel addresses already resolved); with `count`, counted in
// each rank's launch counter (KernelPath::countLaunch).
ncclResult_t launchDirectOps(const std::vector<OpDesc*>& ops, const dev::StreamRef& stream, bool count);

// Blocks per rank for a direct `kind` call whose largest buffer is `bytes`, with `nranks`
// ranks, when the device keeps `resident` blocks at once (0: unknown).
int directBlocksPerRank(OpKind kind, size_t bytes, int nranks, int resident);

}  // namespace accl
