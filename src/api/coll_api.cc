// Collective and point-to-point entry points: validate every argument (naming the bad one
// and its value), then record the op with the group machinery.
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include "api/api.h"
#include "base/check.h"
#include "base/param.h"
#include "sched/board_fast_path.h"
#include "sched/call_stamp.h"
#include "sched/pairs_fast_path.h"
#include "sched/group.h"
#include "sched/op.h"

using namespace accl;

namespace {

struct Call {
  const char* fn;
  OpKind kind;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  int type;  // raw values: checked before they become enums (see rawEnum)
  int op;    // ncclNumOps for ops without a reduction
  int root;        // root or peer; -1 if none
  ncclComm_t comm;
  cudaStream_t stream;
};

bool hasRoot(OpKind k) {
  return k == OpKind::Broadcast || k == OpKind::Reduce || k == OpKind::Gather || k == OpKind::Scatter;
}

// Byte ranges this rank reads and writes; NULL-able where the API allows it.
struct Extents {
  size_t sendElems;
  size_t recvElems;
  bool needSend;
  bool needRecv;
};

Extents extentsOf(const Call& c, int rank, int n) {
  Extents e{c.count, c.count, true, true};
  switch (c.kind) {
    case OpKind::AllGather: e.recvElems = c.count * n; break;
    case OpKind::ReduceScatter: e.sendElems = c.count * n; break;
    case OpKind::AlltoAll: e.sendElems = e.recvElems = c.count * n; break;
    case OpKind::Broadcast: e.needSend = rank == c.root; break;
    case OpKind::Reduce: e.needRecv = rank == c.root; break;
    case OpKind::Gather:
      e.recvElems = c.count * n;
      e.needRecv = rank == c.root;
      break;
    case OpKind::Scatter:
      e.sendElems = c.count * n;
      e.needSend = rank == c.root;
      break;
    case OpKind::Send: e.needRecv = false; break;
    case OpKind::Recv: e.needSend = false; break;
    default: break;
  }
  return e;
}

// In-place layouts the API defines; any other overlap of input and output is an error.
bool legalOverlap(const Call& c, int rank, size_t esize) {
  const char* s = static_cast<const char*>(c.sendbuff);
  const char* r = static_cast<const char*>(c.recvbuff);
  switch (c.kind) {
    case OpKind::AllGather: return s == r + rank * c.count * esize;
    case OpKind::ReduceScatter: return r == s + rank * c.count * esize;
    case OpKind::Gather: return s == r + c.root * c.count * esize;
    case OpKind::Scatter: return r == s + c.root * c.count * esize;
    default: return s == r;
  }
}

// Holds comm.callingThread for one call; refuses a second thread while another is inside.
class CallingThreadClaim {
 public:
  explicit CallingThreadClaim(Comm& comm) : comm_(comm) {
    static thread_local char token;
    const uintptr_t me = reinterpret_cast<uintptr_t>(&token);
    uintptr_t owner = 0;
    if (comm_.callingThread.compare_exchange_strong(owner, me, std::memory_order_acquire)) {
      held_ = true;
    } else {
      otherThread_ = owner != me;  // the same thread again (a callback) is not a second caller
    }
  }
  ~CallingThreadClaim() {
    if (held_) comm_.callingThread.store(0, std::memory_order_release);
  }
  bool otherThread() const { return otherThread_; }

 private:
  Comm& comm_;
  bool held_ = false;
  bool otherThread_ = false;
};

// A call refused for its arguments on this rank still takes its place in the communicator's
// call sequence, or each later call would pair with the peers' previous one (and succeed with
// their other iteration's data). It runs as a void call (OpDesc::refused): no data, its call
// number, and on the host path a realignment it asks for at once (sched/realign.h), so the
// peers' matching call fails naming this rank and the argument, and the next call is exact
// everywhere; with ACCL_CHECK_MISMATCH=2 its fingerprint says it was refused. Outside groups,
// for collectives of communicators whose calls carry stamps or fingerprints on the host path
// and whose ranks are in different processes. The void call waits, like any collective, for
// the peers to reach their matching call.
void runVoidCall(const Call& c, const std::shared_ptr<Comm>& comm, RefusedArg arg, const char* text) {
  const bool stamps = callStampsOn() && comm->backend->hostBuffers();
  const bool fingerprints = param::checkMismatch() == 2 && comm->backend->hostBuffers();
  if (c.kind == OpKind::Send || c.kind == OpKind::Recv || comm->nranks < 2 || inGroup() || comm->kernelPath ||
      comm->stagedPath || !(stamps || fingerprints) || peerRankInThisProcess(*comm))
    return;  // (ranks of one process: one thread may drive them all, and a void call waits for them)
  OpDesc op;
  if (comm->backend->resolveStream(c.fn, c.stream, &op.stream) != ncclSuccess) return;
  op.kind = c.kind;
  op.count = c.count;
  op.type = c.type >= 0 && c.type < ncclNumTypes ? static_cast<ncclDataType_t>(c.type) : ncclInt8;
  if (opReduces(c.kind) && c.op >= 0 && c.op < ncclNumOps && c.op != ncclAvg)
    op.red = static_cast<dev::RedKind>(c.op);
  op.root = c.root;
  op.comm = comm;
  op.refusedArg = arg;
  op.refused = std::string("rank ") + std::to_string(comm->rank) + " refused its call for its arguments (" + text + ")";
  if (stamps) {
    op.stamp = stampOf(op, comm->callSeq.fetch_add(1, std::memory_order_relaxed) + 1);
    op.stamp.flags |= kStampRefused;
    op.refused += " (call #" + std::to_string(op.stamp.seq) + ")";
  }
  (void)enqueueOp(std::make_unique<OpDesc>(std::move(op)));  // fails with the peers' call; this one's error is `arg`
}

// WARNs why the call is refused, runs its void stand-in, and returns ncclInvalidArgument.
[[gnu::format(printf, 4, 5)]] ncclResult_t refuse(const Call& c, const std::shared_ptr<Comm>& comm, RefusedArg arg,
                                                  const char* fmt, ...) {
  char text[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  WARN("%s", text);
  runVoidCall(c, comm, arg, text);
  return ncclInvalidArgument;
}

ncclResult_t record(const Call& c) {
  std::shared_ptr<Comm> comm;
  NCCLCHECK(lookupComm(c.comm, c.fn, &comm));
  CallingThreadClaim claim(*comm);
  if (claim.otherThread()) {
    WARN("%s: comm %p is in a call from another thread right now; NCCL forbids calling one communicator from "
         "two threads at once (their calls would pair with the wrong calls of the peers): serialize the calls, "
         "or give each thread its own communicator (ncclCommSplit)",
         c.fn, static_cast<void*>(c.comm));
    return ncclInvalidUsage;
  }
  if (comm->initState.load() == ncclInProgress) {
    WARN("%s: comm %p is still initializing (non-blocking init); poll ncclCommGetAsyncError until it is done",
         c.fn, static_cast<void*>(c.comm));
    return ncclInvalidUsage;
  }
  if (comm->initState.load() != ncclSuccess || comm->revoked.load() || comm->finalized.load()) {
    WARN("%s: comm %p cannot take new operations (%s)", c.fn, static_cast<void*>(c.comm),
         comm->revoked.load() ? "revoked" : comm->finalized.load() ? "finalized" : "its initialization failed");
    return ncclInvalidUsage;
  }
  if (c.type < 0 || c.type >= ncclNumTypes) {
    return refuse(c, comm, RefusedArg::Datatype, "%s: datatype = %d is not a valid ncclDataType_t", c.fn, c.type);
  }
  const ncclDataType_t type = static_cast<ncclDataType_t>(c.type);
  const int n = comm->nranks;
  const size_t esize = dev::typeSize(type);
  if (c.count > SIZE_MAX / esize / static_cast<size_t>(n)) {
    return refuse(c, comm, RefusedArg::Count, "%s: count = %zu overflows the address space for %s on %d ranks", c.fn,
                  c.count, dev::typeName(type), n);
  }
  if (hasRoot(c.kind) && (c.root < 0 || c.root >= n)) {
    return refuse(c, comm, RefusedArg::Root, "%s: root = %d is out of range [0, %d)", c.fn, c.root, n);
  }
  if ((c.kind == OpKind::Send || c.kind == OpKind::Recv) && (c.root < 0 || c.root >= n)) {
    WARN("%s: peer = %d is out of range [0, %d)", c.fn, c.root, n);
    return ncclInvalidArgument;
  }
  dev::StreamRef stream;
  NCCLCHECK(comm->backend->resolveStream(c.fn, c.stream, &stream));

  // On the stack: a direct board call (the common small op) then allocates nothing.
  OpDesc op;
  op.kind = c.kind;
  op.count = c.count;
  op.type = type;
  (c.kind == OpKind::Send || c.kind == OpKind::Recv ? op.peer : op.root) = c.root;  // the call's root-or-peer
  op.stream = stream;
  if (opReduces(c.kind)) {
    if (c.op < 0) {
      return refuse(c, comm, RefusedArg::Op, "%s: op = %d is not a valid ncclRedOp_t", c.fn, c.op);
    }
    if (c.op < ncclNumOps) {
      op.avg = c.op == ncclAvg;
      op.red = c.op == ncclAvg ? dev::RedKind::Sum : static_cast<dev::RedKind>(c.op);
    } else {
      ncclDataType_t madeFor = type;
      bool live = false;
      {
        std::lock_guard<std::mutex> lk(comm->redOpMu);  // not held while a refused call runs
        size_t idx = static_cast<size_t>(c.op) - ncclNumOps;
        if (idx < comm->redOps.size() && comm->redOps[idx].live) {
          const RedOpEntry& e = comm->redOps[idx];
          live = true;
          madeFor = e.type;
          std::memcpy(op.scalar, e.scalar, sizeof(op.scalar));
          if (e.residence == ncclScalarDevice) op.deviceScalar = e.deviceScalar;
        }
      }
      if (!live)
        return refuse(c, comm, RefusedArg::Op,
                      "%s: op = %d is neither a built-in op nor a live ncclRedOpCreatePreMulSum handle of comm %p",
                      c.fn, c.op, static_cast<void*>(c.comm));
      if (madeFor != type)
        return refuse(c, comm, RefusedArg::Op, "%s: op %d was created for %s but is used with %s", c.fn, c.op,
                      dev::typeName(madeFor), dev::typeName(type));
      op.preMul = true;
      op.red = dev::RedKind::Sum;
    }
  }
  if (c.count > 0) {
    Extents e = extentsOf(c, comm->rank, n);
    if (e.needSend && c.sendbuff == nullptr) {
      return refuse(c, comm, RefusedArg::SendBuff, "%s: sendbuff is NULL with count = %zu", c.fn, c.count);
    }
    if (e.needRecv && c.recvbuff == nullptr) {
      return refuse(c, comm, RefusedArg::RecvBuff, "%s: recvbuff is NULL with count = %zu", c.fn, c.count);
    }
    if (e.needSend && e.needRecv) {
      uintptr_t s0 = reinterpret_cast<uintptr_t>(c.sendbuff), s1 = s0 + e.sendElems * esize;
      uintptr_t r0 = reinterpret_cast<uintptr_t>(c.recvbuff), r1 = r0 + e.recvElems * esize;
      if (s0 < r1 && r0 < s1 && !legalOverlap(c, comm->rank, esize)) {
        return refuse(c, comm, RefusedArg::Overlap,
                      "%s: sendbuff %p and recvbuff %p overlap but are not the in-place layout this collective "
                      "defines",
                      c.fn, c.sendbuff, c.recvbuff);
      }
    }
  }
  INFO(kSubsysColl, "%s: sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d] stream %p",
       c.fn, c.sendbuff, c.recvbuff, c.count, c.type, c.op, c.root,
       static_cast<void*>(c.comm), n, static_cast<void*>(c.stream));
  if (c.count == 0) return ncclSuccess;  // legal no-op
  {
    Extents e = extentsOf(c, comm->rank, n);
    if (e.needSend) NCCLCHECK(comm->backend->checkBuffer(c.fn, "sendbuff", c.sendbuff));
    if (e.needRecv && c.recvbuff != c.sendbuff) NCCLCHECK(comm->backend->checkBuffer(c.fn, "recvbuff", c.recvbuff));
  }
  op.sendbuff = c.sendbuff;
  op.recvbuff = c.recvbuff;
  op.comm = std::move(comm);
  // Host buffers, and device buffers whose collective kernels carry and check stamps (staged
  // kernels carry none: the host communicator that runs their rounds stamps its own calls).
  if (op.comm->kernelPath ? kernelStampsOn() : callStampsOn() && op.comm->backend->hostBuffers())
    op.stamp = stampOf(op, op.isP2p() ? op.comm->callSeq.load(std::memory_order_relaxed)
                                      : op.comm->callSeq.fetch_add(1, std::memory_order_relaxed) + 1);
  ncclResult_t direct;
  if (runOnBoardDirectly(op, &direct)) return direct;
  if (runAllPairsDirectly(op, &direct)) return direct;
  return enqueueOp(std::make_unique<OpDesc>(std::move(op)));
}

}  // namespace

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return record({"ncclAllReduce", OpKind::AllReduce, sendbuff, recvbuff, count, rawEnum(datatype), rawEnum(op), -1, comm, stream});
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream) {
  return record({"ncclBroadcast", OpKind::Broadcast, sendbuff, recvbuff, count, rawEnum(datatype), ncclNumOps, root, comm,
                 stream});
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
         cudaStream_t stream) {
  return record({"ncclBcast", OpKind::Broadcast, buff, buff, count, rawEnum(datatype), ncclNumOps, root, comm, stream});
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return record({"ncclReduce", OpKind::Reduce, sendbuff, recvbuff, count, rawEnum(datatype), rawEnum(op), root, comm, stream});
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return record({"ncclAllGather", OpKind::AllGather, sendbuff, recvbuff, sendcount, rawEnum(datatype), ncclNumOps, -1, comm,
                 stream});
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return record({"ncclReduceScatter", OpKind::ReduceScatter, sendbuff, recvbuff, recvcount, rawEnum(datatype), rawEnum(op), -1, comm,
                 stream});
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream) {
  return record({"ncclAlltoAll", OpKind::AlltoAll, sendbuff, recvbuff, count, rawEnum(datatype), ncclNumOps, -1, comm, stream});
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream) {
  return record({"ncclGather", OpKind::Gather, sendbuff, recvbuff, count, rawEnum(datatype), ncclNumOps, root, comm, stream});
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream) {
  return record({"ncclScatter", OpKind::Scatter, sendbuff, recvbuff, count, rawEnum(datatype), ncclNumOps, root, comm, stream});
}

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  return record({"ncclSend", OpKind::Send, sendbuff, nullptr, count, rawEnum(datatype), ncclNumOps, peer, comm, stream});
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream) {
  return record({"ncclRecv", OpKind::Recv, nullptr, recvbuff, count, rawEnum(datatype), ncclNumOps, peer, comm, stream});
}
