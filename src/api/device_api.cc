// Host functions of NCCL's device API (nccl_device/*.h, 2.28). Device-initiated
// communication needs a GPU backend; on the host backend the resource calls fail with
// ncclInvalidUsage and say why, while the team queries answer from the communicator.
#include <algorithm>
#include "api/api.h"
#include "base/check.h"
#include "comm/comm.h"

using namespace accl;

extern "C" {
struct ncclDevComm;
struct ncclDevCommRequirements;
struct ncclDevResourceRequirements;
struct ncclLsaBarrierHandle;
struct ncclGinBarrierHandle;
struct ncclLLA2AHandle;
struct ncclTeam {
  int nRanks;
  int rank;
  int stride;
};
}

namespace {
ncclResult_t noDeviceApi(const char* fn) {
  WARN("%s: the NCCL device API needs a GPU backend; this communicator runs on the host backend", fn);
  return ncclInvalidUsage;
}
}  // namespace

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const ncclDevCommRequirements* reqs, ncclDevComm* out) {
  (void)comm, (void)reqs, (void)out;
  return noDeviceApi("ncclDevCommCreate");
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const ncclDevComm* devComm) {
  (void)comm, (void)devComm;
  return noDeviceApi("ncclDevCommDestroy");
}

NCCL_API(ncclTeam, ncclTeamWorld, ncclComm_t comm) {
  std::shared_ptr<Comm> c;
  if (lookupComm(comm, "ncclTeamWorld", &c) != ncclSuccess) return {0, -1, 1};
  return {c->nranks, c->rank, 1};
}

NCCL_API(ncclTeam, ncclTeamLsa, ncclComm_t comm) {
  std::shared_ptr<Comm> c;
  if (lookupComm(comm, "ncclTeamLsa", &c) != ncclSuccess) return {0, -1, 1};
  return {c->localRankCount(), c->localIndex, 1};
}

NCCL_API(ncclTeam, ncclTeamRail, ncclComm_t comm) {
  std::shared_ptr<Comm> c;
  if (lookupComm(comm, "ncclTeamRail", &c) != ncclSuccess) return {0, -1, 1};
  int perHost = std::max(1, c->localRankCount());
  return {c->nranks / perHost, c->rank / perHost, perHost};
}

NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam team, int rank) {
  std::shared_ptr<Comm> c;
  if (lookupComm(comm, "ncclTeamRankToWorld", &c) != ncclSuccess) return -1;
  return c->rank + (rank - team.rank) * team.stride;
}

NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam team, int rank) {
  std::shared_ptr<Comm> c;
  if (lookupComm(comm, "ncclTeamRankToLsa", &c) != ncclSuccess) return -1;
  int world = c->rank + (rank - team.rank) * team.stride;
  auto it = std::find(c->localRanks.begin(), c->localRanks.end(), world);
  return it == c->localRanks.end() ? -1 : static_cast<int>(it - c->localRanks.begin());
}

NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam team, int nBarriers, ncclLsaBarrierHandle* outHandle,
         ncclDevResourceRequirements* outReq) {
  (void)team, (void)nBarriers, (void)outHandle, (void)outReq;
  return noDeviceApi("ncclLsaBarrierCreateRequirement");
}

NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam team, int nBarriers,
         ncclGinBarrierHandle* outHandle, ncclDevResourceRequirements* outReq) {
  (void)comm, (void)team, (void)nBarriers, (void)outHandle, (void)outReq;
  return noDeviceApi("ncclGinBarrierCreateRequirement");
}

NCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  // Slots of 8 bytes each, enough for maxElts elements of maxEltSize bytes.
  return maxElts * ((maxEltSize + 7) / 8);
}

NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, ncclLLA2AHandle* outHandle,
         ncclDevResourceRequirements* outReq) {
  (void)nBlocks, (void)nSlots, (void)outHandle, (void)outReq;
  return noDeviceApi("ncclLLA2ACreateRequirement");
}
