// PreMulSum reduction operators: per-communicator handles >= ncclNumOps.
#include <cstring>
#include "api/api.h"
#include "base/check.h"
#include "comm/comm.h"
#include "device.h"

using namespace accl;

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
         ncclScalarResidence_t residence, ncclComm_t comm) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, "ncclRedOpCreatePreMulSum", &c));
  if (op == nullptr || scalar == nullptr) {
    WARN("ncclRedOpCreatePreMulSum: %s is NULL", op == nullptr ? "op" : "scalar");
    return ncclInvalidArgument;
  }
  const int rawType = rawEnum(datatype), rawResidence = rawEnum(residence);
  if (rawType < 0 || rawType >= ncclNumTypes) {
    WARN("ncclRedOpCreatePreMulSum: datatype = %d is not a valid ncclDataType_t", rawType);
    return ncclInvalidArgument;
  }
  if (rawResidence != ncclScalarDevice && rawResidence != ncclScalarHostImmediate) {
    WARN("ncclRedOpCreatePreMulSum: residence = %d is invalid", rawResidence);
    return ncclInvalidArgument;
  }
  RedOpEntry e;
  e.live = true;
  e.type = datatype;
  e.residence = residence;
  if (residence == ncclScalarHostImmediate) {
    std::memcpy(e.scalar, scalar, dev::typeSize(datatype));
  } else {
    e.deviceScalar = scalar;  // read when each collective runs, like a device pointer
  }
  std::lock_guard<std::mutex> lk(c->redOpMu);
  size_t idx = 0;
  while (idx < c->redOps.size() && c->redOps[idx].live) idx++;
  if (idx == c->redOps.size()) c->redOps.push_back(e);
  else c->redOps[idx] = e;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + idx);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, "ncclRedOpDestroy", &c));
  if (op < ncclNumOps) {
    WARN("ncclRedOpDestroy: op = %d is a built-in operator and cannot be destroyed", static_cast<int>(op));
    return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lk(c->redOpMu);
  size_t idx = static_cast<size_t>(op) - ncclNumOps;
  if (idx >= c->redOps.size() || !c->redOps[idx].live) {
    WARN("ncclRedOpDestroy: op = %d is not a live operator of comm %p", static_cast<int>(op), static_cast<void*>(comm));
    return ncclInvalidArgument;
  }
  c->redOps[idx].live = false;
  return ncclSuccess;
}
