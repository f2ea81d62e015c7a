// direct_wait.h: how long a direct call (board_fast_path.cc, pairs_fast_path.cc) waits for
// its peers on the calling thread before it hands the op to the executor, which then keeps
// yielding a while and finally sleeps on the doorbell.
#pragma once
#include <cstdint>
#include "comm/comm.h"

namespace accl {

struct DirectWaitBudget {
  int64_t spinUsec;     // pause-spinning (with a yield every few checks) until this long
  int64_t totalUsec;    // then yielding until this long
  bool oversubscribed;  // this host's ranks outnumber its cores: yields go to peers (plain)
};

// ACCL_DIRECT_SPIN_USEC and ACCL_YIELD_USEC, or when unset: `spinWhenCoresFree` while the
// ranks of this host have a core each (0 when they outnumber the cores: a spin steals the
// core from the rank we wait for), then waitYieldUsec of yielding.
DirectWaitBudget directWaitBudget(const Comm& c, int64_t spinWhenCoresFree);

// How long a waiting rank yields its core before it sleeps on a doorbell: ACCL_YIELD_USEC, or
// when unset 50 us for a communicator inside one host whose ranks have a core each, 2000 us
// when the ranks outnumber the cores or the communicator spans hosts. Then a peer's answer
// often takes longer than 50 us (the other ranks must run first, or it crosses a network), and
// a rank that went to sleep also waits for its own wake-up on every hop: measured on 4 netns
// pods x 2 ranks on 2 vCPUs (8 B all-reduce across pods, round robin; the command is in
// docs/scale.md, "Against OpenMPI"), 440-560 us with 200, 245-258 us with 2000; on one host
// (accl-run -np 8, 8 B) no worse. Yielding costs nothing when another thread is runnable.
int64_t waitYieldUsec(bool oversubscribed, bool spansHosts);

}  // namespace accl
