// direct_wait.h: how long a direct call (board_fast_path.cc, pairs_fast_path.cc) waits for
// its peers on the calling thread before it hands the op to the executor, which then keeps
// yielding a while and finally sleeps on the doorbell.
#pragma once
#include <cstdint>
#include "comm/comm.h"

namespace accl {

struct DirectWaitBudget {
  int64_t spinUsec;   // pause-spinning (with a yield every few checks) until this long
  int64_t totalUsec;  // then yielding until this long
};

// ACCL_DIRECT_SPIN_USEC and ACCL_YIELD_USEC, or when unset: `spinWhenCoresFree` while the
// ranks of this host have a core each (0 when they outnumber the cores: a spin steals the
// core from the rank we wait for), then 50 us of yielding (200 when oversubscribed).
DirectWaitBudget directWaitBudget(const Comm& c, int64_t spinWhenCoresFree);

}  // namespace accl
