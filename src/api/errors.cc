// Error reporting entry points: result-code text, the last WARN, and debug re-initialisation.
#include "api/api.h"
#include "base/log.h"

NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (a CUDA call failed)";
    case ncclSystemError: return "unhandled system error (a system call, socket or allocation failed)";
    case ncclInternalError: return "internal error (library bug or network failure)";
    case ncclInvalidArgument: return "invalid argument (a value passed to the call is wrong)";
    case ncclInvalidUsage: return "invalid usage (the call is not allowed in this state or order)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

// One text per process, as in NCCL: the comm argument only exists for future per-comm errors.
NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  (void)comm;
  return accl::lastErrorText();
}

NCCL_API(void, ncclResetDebugInit, void) { accl::resetLogInit(); }

// Plain (un-profiled) symbol some tools call directly; deliberately without a pncclX twin.
extern "C" __attribute__((visibility("default"))) void ncclResetDebugInitInternal(void) {
  accl::resetLogInit();
}
