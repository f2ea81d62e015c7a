// Entry points that create communicators.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>
#include "api/api.h"
#include "api/comm_create.h"
#include "base/check.h"
#include "sched/group.h"

using namespace accl;

namespace {

// Names a communicator made from `parent` (shown if a rank reaches the wrong rendezvous).
std::string childLabel(const char* how, const Comm& parent, int color) {
  std::string what = how;
  if (color >= 0) what += " colour " + std::to_string(color);
  char text[kUniqueIdLabelBytes];
  snprintf(text, sizeof(text), "%s of comm %016llx (%d ranks)", what.c_str(),
           static_cast<unsigned long long>(parent.nonce), parent.nranks);
  return text;
}

}  // namespace

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) {
    WARN("ncclGetUniqueId: uniqueId pointer is NULL");
    return ncclInvalidArgument;
  }
  return bootstrapGetUniqueId(uniqueId);
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return createComm("ncclCommInitRank", comm, nranks, commId, rank, nullptr, nullptr, -1);
}

NCCL_API(ncclResult_t, ncclCommInitRankHost, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return createComm("ncclCommInitRankHost", comm, nranks, commId, rank, nullptr, nullptr, -1, true);
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
         ncclConfig_t* config) {
  return createComm("ncclCommInitRankConfig", comm, nranks, commId, rank, config, nullptr, -1);
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
         ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr) {
    WARN("ncclCommInitRankScalable: need at least one unique id (nId = %d, commIds = %p)", nId,
         static_cast<void*>(commIds));
    return ncclInvalidArgument;
  }
  // One rendezvous root serves every rank here, so the first id is enough.
  return createComm("ncclCommInitRankScalable", newcomm, nranks, commIds[0], myrank, config, nullptr, -1);
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr) {
    WARN("ncclCommInitAll: comms pointer is NULL");
    return ncclInvalidArgument;
  }
  if (ndev < 1) {
    WARN("ncclCommInitAll: ndev = %d is invalid (must be >= 1)", ndev);
    return ncclInvalidArgument;
  }
  if (devlist != nullptr) {
    for (int i = 0; i < ndev; i++) {
      if (devlist[i] < 0) {
        WARN("ncclCommInitAll: devlist[%d] = %d is not a device index", i, devlist[i]);
        return ncclInvalidArgument;
      }
    }
  }
  ncclUniqueId id;
  NCCLCHECK(bootstrapNewUniqueId(&id, "ncclCommInitAll of " + std::to_string(ndev) + " ranks"));
  groupStart();
  ncclResult_t first = ncclSuccess;
  for (int i = 0; i < ndev; i++) {
    ncclResult_t r = createComm("ncclCommInitAll", &comms[i], ndev, id, i, nullptr, nullptr, devlist ? devlist[i] : i);
    if (r != ncclSuccess && first == ncclSuccess) first = r;
  }
  ncclResult_t r = groupEnd();
  return first != ncclSuccess ? first : r;
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
         ncclConfig_t* config) {
  std::shared_ptr<Comm> parent;
  NCCLCHECK(lookupComm(comm, "ncclCommSplit", &parent));
  if (newcomm == nullptr) {
    WARN("ncclCommSplit: newcomm pointer is NULL");
    return ncclInvalidArgument;
  }
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    WARN("ncclCommSplit: color = %d is invalid (must be >= 0 or NCCL_SPLIT_NOCOLOR)", color);
    return ncclInvalidArgument;
  }
  struct Entry {
    int color;
    int key;
    ncclUniqueId id;
  };
  std::vector<Entry> all(parent->nranks);
  all[parent->rank] = {color, key, {}};
  NCCLCHECK(parent->bootstrap->allGather(all.data(), sizeof(Entry)));
  std::vector<int> members;
  for (int r = 0; r < parent->nranks; r++)
    if (all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
  // The first member of each colour creates the new rendezvous; a second round shares it.
  // Never the NCCL_COMM_ID one: that names only the job's first communicator.
  const bool leader = color != NCCL_SPLIT_NOCOLOR && members.front() == parent->rank;
  if (leader) NCCLCHECK(bootstrapNewUniqueId(&all[parent->rank].id, childLabel("ncclCommSplit", *parent, color)));
  NCCLCHECK(parent->bootstrap->allGather(all.data(), sizeof(Entry)));
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  int newRank = static_cast<int>(std::find(members.begin(), members.end(), parent->rank) - members.begin());
  return createComm("ncclCommSplit", newcomm, static_cast<int>(members.size()), all[members.front()].id, newRank,
                    config, &parent->config, parent->cudaDev, parent->backend->hostBuffers());
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  std::shared_ptr<Comm> parent;
  NCCLCHECK(lookupComm(comm, "ncclCommShrink", &parent));
  if (newcomm == nullptr) {
    WARN("ncclCommShrink: newcomm pointer is NULL");
    return ncclInvalidArgument;
  }
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    WARN("ncclCommShrink: shrinkFlags = %d is invalid (NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT)", shrinkFlags);
    return ncclInvalidArgument;
  }
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && excludeRanksList == nullptr)) {
    WARN("ncclCommShrink: excludeRanksCount = %d with excludeRanksList = %p is invalid", excludeRanksCount,
         static_cast<void*>(excludeRanksList));
    return ncclInvalidArgument;
  }
  std::vector<bool> excluded(parent->nranks, false);
  for (int i = 0; i < excludeRanksCount; i++) {
    int r = excludeRanksList[i];
    if (r < 0 || r >= parent->nranks || excluded[r]) {
      WARN("ncclCommShrink: excludeRanksList[%d] = %d is out of range [0, %d) or repeated", i, r, parent->nranks);
      return ncclInvalidArgument;
    }
    excluded[r] = true;
  }
  if (excluded[parent->rank]) {
    WARN("ncclCommShrink: rank %d is in its own exclude list; excluded ranks must not call ncclCommShrink",
         parent->rank);
    return ncclInvalidUsage;
  }
  if (shrinkFlags == NCCL_SHRINK_ABORT) {
    parent->revoked.store(1);
    ringDoorbell(parent->bell());
    while (parent->inFlight.load() != 0) sched_yield();
  }
  std::vector<int> survivors;
  for (int r = 0; r < parent->nranks; r++)
    if (!excluded[r]) survivors.push_back(r);
  ncclUniqueId id;
  const int tag = 0x5348524b;  // "SHRK"
  if (survivors.front() == parent->rank) {
    NCCLCHECK(bootstrapNewUniqueId(&id, childLabel("ncclCommShrink", *parent, -1)));
    for (size_t i = 1; i < survivors.size(); i++) NCCLCHECK(parent->bootstrap->send(survivors[i], tag, &id, sizeof(id)));
  } else {
    NCCLCHECK(parent->bootstrap->recv(survivors.front(), tag, &id, sizeof(id)));
  }
  int newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), parent->rank) - survivors.begin());
  return createComm("ncclCommShrink", newcomm, static_cast<int>(survivors.size()), id, newRank, config,
                    &parent->config, parent->cudaDev, parent->backend->hostBuffers());
}
