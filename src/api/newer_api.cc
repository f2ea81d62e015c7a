// Entry points that NCCL 2.29/2.30 added and that programs built against those releases import
// (PyTorch 2.15's libtorch_cuda.so links all of them, so without them it cannot even load over
// ACCL). We report NCCL 2.27.7, so well-behaved callers never use them; a caller that does gets
// ncclInvalidUsage and a log line naming the call, never a crash.
#include <cstdint>
#include "api/api.h"
#include "base/check.h"
#include "comm/comm.h"

using namespace accl;

extern "C" {
// Layouts as NCCL 2.30's nccl.h declares them; only pointers to them cross this boundary.
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;
}

namespace {
ncclResult_t unsupported(const char* fn, const char* what) {
  WARN("%s: %s is not supported by ACCL (it implements the NCCL 2.27 API; ncclGetVersion says so)", fn, what);
  return ncclInvalidUsage;
}

// Checks the communicator first so a bad handle is reported as such, as for every other call.
ncclResult_t unsupportedOnComm(ncclComm_t comm, const char* fn, const char* what) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, fn, &c));
  return unsupported(fn, what);
}
}  // namespace

NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) {
  (void)uniqueId;
  return unsupportedOnComm(comm, "ncclCommGetUniqueId", "growing a communicator");
}

NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
         ncclComm_t* newcomm, ncclConfig_t* config) {
  (void)nRanks, (void)uniqueId, (void)rank, (void)config;
  if (newcomm != nullptr) *newcomm = nullptr;
  if (comm == nullptr) return unsupported("ncclCommGrow", "growing a communicator");
  return unsupportedOnComm(comm, "ncclCommGrow", "growing a communicator");
}

NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) {
  (void)flags;
  return unsupportedOnComm(comm, "ncclCommSuspend", "suspending a communicator");
}

NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm) {
  return unsupportedOnComm(comm, "ncclCommResume", "resuming a communicator");
}

NCCL_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, int stat, uint64_t* value) {
  (void)stat, (void)value;
  return unsupportedOnComm(comm, "ncclCommMemStats", "communicator memory statistics");
}

NCCL_API(ncclResult_t, ncclPutSignal, const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         cudaStream_t stream) {
  (void)localbuff, (void)count, (void)datatype, (void)peer, (void)peerWin, (void)peerWinOffset, (void)sigIdx,
      (void)ctx, (void)flags, (void)stream;
  return unsupportedOnComm(comm, "ncclPutSignal", "one-sided put with signal");
}

NCCL_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         cudaStream_t stream) {
  (void)peer, (void)sigIdx, (void)ctx, (void)flags, (void)stream;
  return unsupportedOnComm(comm, "ncclSignal", "one-sided signals");
}

NCCL_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
         cudaStream_t stream) {
  (void)nDesc, (void)signalDescs, (void)stream;
  return unsupportedOnComm(comm, "ncclWaitSignal", "one-sided signals");
}

NCCL_API(ncclResult_t, ncclGetPeerDevicePointer, ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  (void)window, (void)offset, (void)peer;
  if (outPtr != nullptr) *outPtr = nullptr;
  return unsupported("ncclGetPeerDevicePointer", "the device API's peer pointers");
}

NCCL_API(ncclResult_t, ncclGetLsaMultimemDevicePointer, ncclWindow_t window, size_t offset, void** outPtr) {
  (void)window, (void)offset;
  if (outPtr != nullptr) *outPtr = nullptr;
  return unsupported("ncclGetLsaMultimemDevicePointer", "multimem (NVLS) pointers");
}
