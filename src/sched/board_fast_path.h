// board_fast_path.h: small all-reduces and all-gathers straight on the ShmDirect board.
// On 2 ranks an 8-byte all-reduce spent ~1 us in recording, planning and the executor
// (allocations, vectors, clock reads, yields) around ~0.2 us of board traffic. A call that
// needs none of that machinery (host buffers, NULL or ACCL host stream, outside a group, one
// board operation, the tuner's choice is ShmDirect, no ACCL_CHECK_MISMATCH or trace) runs
// here: posted and folded right away. When peers are late it hands the half-done operation
// to the executor, which finishes it with its usual waiting, hang reports, timeouts and
// failure handling.
#pragma once
#include "sched/op.h"

namespace accl {

// Runs `op` directly when it qualifies (on the NULL stream: now, on the calling thread; on a
// host stream: queued in order, started on the calling thread when the stream is idle).
// Returns true with the call's result in *res; false when the op must take the normal path
// (nothing was done then, and `op` is as it was); after true, `op` may have been moved from.
bool runOnBoardDirectly(OpDesc& op, ncclResult_t* res);

}  // namespace accl
