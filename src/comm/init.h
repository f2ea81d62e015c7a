// init.h: bringing a communicator up: bootstrap rendezvous, exchange of peer information,
// and a connection to every peer (shared memory on the same host, else TCP).
#pragma once
#include "comm/comm.h"

namespace accl {

// Collective over all ranks of `id`. On failure the comm is left closed (safe to destroy).
ncclResult_t initComm(Comm* comm, const ncclUniqueId& id, int nranks, int rank);

}  // namespace accl
