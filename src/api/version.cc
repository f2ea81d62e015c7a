// Library identity: version code and the ACCL banner.
#include "api/api.h"
#include "base/log.h"

NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == nullptr) {
    WARN("ncclGetVersion: version pointer is NULL");
    return ncclInvalidArgument;
  }
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(const char*, ncclAcclVersionString, void) {
  return "ACCL 0.1.0 (NCCL API 2.27.7, backends: host, cuda)";
}
