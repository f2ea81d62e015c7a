// Error reporting entry points: result-code text, the last WARN, and debug re-initialisation.
#include <memory>
#include <string>
#include "api/api.h"
#include "base/log.h"
#include "comm/comm.h"

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

// The process's last WARN, as in NCCL; but for a communicator that has failed, why it failed
// as first said (Comm::failureCause): WARNs that follow a failure (a neighbour closing, other
// ranks of the process failing in turn) must not replace the cause the user needs.
NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  static thread_local std::string causeCopy;
  std::shared_ptr<accl::Comm> c;
  if (comm != nullptr && accl::findLiveComm(comm, &c) && c->asyncError.load() != ncclSuccess) {
    causeCopy = c->failureCause();
    if (!causeCopy.empty()) return causeCopy.c_str();
  }
  return accl::lastErrorText();
}

NCCL_API(void, ncclResetDebugInit, void) { accl::resetLogInit(); }

// Plain (un-profiled) symbol some tools call directly; deliberately without a pncclX twin.
extern "C" __attribute__((visibility("default"))) void ncclResetDebugInitInternal(void) {
  accl::resetLogInit();
}
