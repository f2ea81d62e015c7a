#include "sched/one_rank_copy.h"
#include "base/log.h"
#include "comm/comm.h"
#include "device.h"
#include "device/backend.h"
#include "nccl.h"

namespace accl {

bool oneRankCopiesOnly(const std::vector<std::unique_ptr<OpDesc>>& ops) {
  if (ops.empty()) return false;
  const dev::StreamRef& first = ops.front()->stream;
  for (const auto& op : ops) {
    if (op->isP2p() || op->preMul || op->comm->nranks != 1 || op->comm->kernelPath == nullptr) return false;
    if (op->stream.kind != dev::StreamKind::Device || op->stream.handle != first.handle ||
        op->comm->backend != ops.front()->comm->backend)
      return false;
  }
  return true;
}

ncclResult_t launchOneRankCopies(const std::vector<std::unique_ptr<OpDesc>>& ops) {
  for (const auto& op : ops) {
    // A failed communicator (an earlier kernel gave up, or it was aborted) takes no more work.
    if (ncclResult_t e = static_cast<ncclResult_t>(op->comm->asyncError.load()); e != ncclSuccess) {
      WARN("rank 0: %s refused: the communicator has failed (%s)", op->describe().c_str(), ncclGetErrorString(e));
      return e;
    }
  }
  for (const auto& op : ops) {
    // One rank: every kind's output is its count elements of input (all-gather and all-to-all
    // over one rank included).
    const size_t bytes = op->count * dev::typeSize(op->type);
    if (bytes == 0 || op->sendbuff == op->recvbuff) continue;
    dev::Backend& backend = *op->comm->backend;
    backend.copy(op->stream, op->recvbuff, op->sendbuff, bytes, false);
    if (backend.failed()) return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

}  // namespace accl
