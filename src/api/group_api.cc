// Group entry points.
#include "api/api.h"
#include "base/log.h"
#include "sched/group.h"

NCCL_API(ncclResult_t, ncclGroupStart, void) { return accl::groupStart(); }

NCCL_API(ncclResult_t, ncclGroupEnd, void) { return accl::groupEnd(); }

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  if (simInfo == nullptr) {
    WARN("ncclGroupSimulateEnd: simInfo is NULL");
    return ncclInvalidArgument;
  }
  if (simInfo->magic != 0x74685283) {
    WARN("ncclGroupSimulateEnd: simInfo was not initialized with NCCL_SIM_INFO_INITIALIZER (magic 0x%x)",
         simInfo->magic);
    return ncclInvalidArgument;
  }
  WARN("ncclGroupSimulateEnd: the host backend has no performance model to simulate the group with");
  return ncclInvalidUsage;
}
