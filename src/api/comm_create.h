// comm_create.h: the one path every init entry point (InitRank*, InitAll, Split, Shrink)
// takes to create a communicator handle and bring it up (now, at group end, or in the
// background for non-blocking configs).
#pragma once
#include <cstdint>
#include "comm/comm.h"

namespace accl {

// cudaDev < 0: the host backend assigns the rank's index among ranks on its host.
ncclResult_t createComm(const char* fn, ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                        const ncclConfig_t* config, const Config* inherit, int cudaDev, bool hostBackend = false);

// The largest nranks whose communicator state fits in this host's physical memory; init refuses more.
int64_t mostRanksThisHostHolds();

// Waits until every op issued on the communicator has finished (or failed).
void waitIdle(Comm& c);

}  // namespace accl
