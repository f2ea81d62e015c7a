// accl.h: the per-communicator switch for rank-order (bitwise reproducible) reductions.
#include "api/api.h"
#include "base/check.h"
#include "comm/comm.h"

using namespace accl;

NCCL_API(ncclResult_t, ncclCommSetDeterministic, ncclComm_t comm, int enable) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, "ncclCommSetDeterministic", &c));
  if (enable != 0 && enable != 1) {
    WARN("ncclCommSetDeterministic: enable = %d is invalid (0 = fastest order, 1 = rank order)", enable);
    return ncclInvalidArgument;
  }
  c->deterministic.store(enable == 1);
  INFO(kSubsysInit | kSubsysColl, "comm %p rank %d: reductions %s", static_cast<void*>(comm), c->rank,
       enable ? "in rank order (deterministic)" : "in the tuner's order");
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommGetDeterministic, ncclComm_t comm, int* enabled) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, "ncclCommGetDeterministic", &c));
  if (enabled == nullptr) {
    WARN("ncclCommGetDeterministic: enabled pointer is NULL");
    return ncclInvalidArgument;
  }
  *enabled = c->deterministic.load() ? 1 : 0;
  return ncclSuccess;
}
