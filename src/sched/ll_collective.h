// ll_collective.h: the LL path (kernels/ll_kernel.h): collectives whose largest buffer is at most
// 64 KiB, among ranks that all reach each other's mailboxes (threads or processes of one node,
// no network proxy), go in one pass of flagged 16-byte lines: one small block per rank, no
// handshake before the data and none after it. Chosen from what every rank shares (the op, its
// size, NCCL_PROTO, the communicator's placement), so all ranks of a call take the same path.
#pragma once
#include <vector>
#include "sched/op.h"

namespace accl {

class KernelPath;

// Whether `op` (a collective of a communicator with a kernel path) runs on the LL path.
bool llEligible(const OpDesc& op, const KernelPath& kp);

// Threads of the LL block for a call moving `bytes` to each peer: one line (8 bytes) per
// thread up to 512, at least 64; NCCL_NTHREADS forces it.
unsigned llThreads(size_t bytes);

// Launches one LL kernel on `stream` for `ops` (collective j of every rank this launch carries;
// each llEligible; kernel addresses resolved); with `count`, counted in each rank's launch
// counter (KernelPath::countLaunch).
ncclResult_t launchLlOps(const std::vector<OpDesc*>& ops, const dev::StreamRef& stream, bool count);

}  // namespace accl
