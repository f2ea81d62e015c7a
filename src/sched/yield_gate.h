// yield_gate.h: whether handing the core over with sched_yield() is cheap on this host now.
// A waiting rank yields so that a peer sharing its core can run its step, which comes back
// within microseconds. But the core may go to another process's busy thread instead, which
// keeps it for its whole time slice: measured here, sched_yield() beside a busy loop on the
// same CPU returned at once or after 3-8 ms, and while a build kept both cores busy an 8 B
// all-reduce at np2 took 1.5-3.6 ms per call with any ACCL_YIELD_USEC above 0 (sockets and
// shared memory alike) against 2-60 us with 0 (sleeping on the doorbell, which an arrival ends
// at once). Where the ranks' cores are shared with each other (netns pods on 2 vCPUs), about
// 0.1% of yields take over a millisecond too, and sleeping there is 2-3x slower than
// yielding. So every yield is timed, and when kDearOf of the last kDearWindow yields of the
// process took over kDearYieldUsec (a busy neighbour makes about a third of them do so),
// yields are "dear" for kDearForMs: waits skip yielding and sleep instead (a direct call hands
// its op to the executor once its spin is over). Then yields are tried afresh.
#pragma once
#include <cstdint>

namespace accl {

inline constexpr int64_t kDearYieldUsec = 2000;
inline constexpr int kDearWindow = 64;
inline constexpr int kDearOf = 8;
inline constexpr int64_t kDearForMs = 1000;

// False while yields are dear (a recent yield lost the core to another process's thread).
bool yieldsAreCheap();
// sched_yield(), timed; the kDearOf-th slow one in kDearWindow makes yields dear.
void timedYield();
// One yield of a waiting rank. Where this host's ranks outnumber its cores the core goes to a
// peer, as it should: a plain yield. Else a courtesy yield while still spinning (not timed: two
// clock reads cost 0.04 us of a 0.33 us call), a timed one past the spin. False, without
// yielding, while yields are dear: the caller pauses while spinning and past the spin stops
// yielding (sleeps, or hands its op to the executor).
bool yieldCore(bool oversubscribed, bool pastSpin);

}  // namespace accl
