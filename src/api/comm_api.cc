// Entry points that query or end communicators.
#include <chrono>
#include <thread>
#include "api/api.h"
#include "api/comm_create.h"
#include "base/check.h"
#include "base/trace.h"
#include "comm/kernel_path.h"
#include "comm/staged_path.h"
#include "sched/call_stamp.h"

using namespace accl;

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, "ncclCommFinalize", &c));
  if (c->revoked.load()) {
    WARN("ncclCommFinalize: comm %p was revoked; only ncclCommDestroy, ncclCommSplit or ncclCommShrink are allowed",
         static_cast<void*>(comm));
    return ncclInvalidUsage;
  }
  if (c->finalized.exchange(1)) {
    WARN("ncclCommFinalize: comm %p is already finalized", static_cast<void*>(comm));
    return ncclInvalidUsage;
  }
  waitIdle(*c);
  return static_cast<ncclResult_t>(c->asyncError.load());
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // NCCL accepts destroying a NULL comm
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, "ncclCommDestroy", &c));
  unregisterComm(comm);
  waitIdle(*c);
  if (c->kernelPath) {
    c->kernelPath->checkKernels(*c, describeStampBytes);  // says so if a kernel gave up
    if (c->kernelPath->frozen())
      c->kernelPath->leaveFrozen(*c);  // mismatched calls: the ranks waiting to realign stop
    else
      c->kernelPath->finishSends(*c);  // what its network proxy still has to send, before depart()
  }
  if (c->stagedPath) {
    c->stagedPath->checkKernels(*c);
    c->stagedPath->finish(*c);  // its proxy serves the last launch's rounds meanwhile
  }
  c->backend->shutdown(false);
  c->depart();
  traceFlush();
  delete comm;  // queued work, if any, keeps its own reference to the Comm
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, "ncclCommAbort", &c));
  unregisterComm(comm);
  c->abortFlag.store(1);
  c->closeTransports(/*leaving=*/true);
  // Every wait polls the abort flag at least every 100 ms; give in-flight work time to leave.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (c->inFlight.load() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  c->backend->shutdown(true);
  traceFlush();
  delete comm;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, "ncclCommRevoke", &c));
  if (revokeFlags != NCCL_REVOKE_DEFAULT) {
    WARN("ncclCommRevoke: revokeFlags = %d is invalid (only NCCL_REVOKE_DEFAULT = 0)", revokeFlags);
    return ncclInvalidArgument;
  }
  c->revoked.store(1);
  ringDoorbell(c->bell());
  while (c->inFlight.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, "ncclCommGetAsyncError", &c));
  if (asyncError == nullptr) {
    WARN("ncclCommGetAsyncError: asyncError pointer is NULL");
    return ncclInvalidArgument;
  }
  int init = c->initState.load();
  if (init == ncclInProgress) {
    *asyncError = ncclInProgress;
  } else {
    // A kernel that gave up: ACCL_TIMEOUT (the communicator failed), or mismatched calls
    // (ncclInvalidUsage until the next call has realigned the streams).
    ncclResult_t kernels = ncclSuccess;
    if (c->kernelPath) kernels = c->kernelPath->checkKernels(*c, describeStampBytes);
    if (c->stagedPath) c->stagedPath->checkKernels(*c);
    *asyncError = static_cast<ncclResult_t>(c->asyncError.load());
    if (*asyncError == ncclSuccess) *asyncError = kernels;
  }
  return ncclSuccess;
}

namespace {
ncclResult_t readyComm(ncclComm_t comm, const char* fn, std::shared_ptr<Comm>* c, const void* out) {
  NCCLCHECK(lookupComm(comm, fn, c));
  if (out == nullptr) {
    WARN("%s: output pointer is NULL", fn);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}
}  // namespace

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(readyComm(comm, "ncclCommCount", &c, count));
  *count = c->nranks;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(readyComm(comm, "ncclCommCuDevice", &c, device));
  *device = c->cudaDev;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(readyComm(comm, "ncclCommUserRank", &c, rank));
  *rank = c->rank;
  return ncclSuccess;
}
