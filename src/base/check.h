// check.h: result propagation. Every fallible call returns ncclResult_t; NCCLCHECK
// returns early on failure and leaves a TRACE breadcrumb with file and line.
#pragma once
#include "nccl.h"
#include "base/log.h"

#define NCCLCHECK(call)                                                        \
  do {                                                                         \
    ncclResult_t accl_res_ = (call);                                           \
    if (accl_res_ != ncclSuccess && accl_res_ != ncclInProgress) {             \
      ACCL_TRACE(accl::kSubsysAll, "%s -> %d", #call, (int)accl_res_);         \
      return accl_res_;                                                        \
    }                                                                          \
  } while (0)

// For OS calls that return -1 and set errno.
#define SYSCHECK(call, what)                                                   \
  do {                                                                         \
    if ((call) == -1) {                                                        \
      WARN("%s failed: %s", what, strerror(errno));                            \
      return ncclSystemError;                                                  \
    }                                                                          \
  } while (0)
