// pairs_fast_path.h: small AllPairs all-reduces run straight from the call. Over sockets an
// 8-byte all-reduce on 2 ranks is one send() and one recv() per rank; recording, planning and
// the executor's passes around them cost about as much again. A call that needs none of that
// (host buffers, NULL stream or an ACCL host stream, outside a group, the tuner's choice is
// AllPairs, no ACCL_CHECK_MISMATCH or trace) runs the AllPairs steps here on the caller's
// thread (a host stream's op: when the stream is idle, else on its worker), through
// the same channels (so the byte stream, padding included, is the one the executor would
// produce) and folds in the same order (so the bits are the same). When peers are late it
// hands the half-done operation to the executor, which finishes it with its usual waiting,
// hang reports, timeouts and failure handling.
#pragma once
#include "sched/op.h"

namespace accl {

// Runs `op` directly when it qualifies (on the NULL stream: now, on the calling thread; on a
// host stream: queued in order, started on the calling thread when the stream is idle).
// Returns true with the call's result in *res; false when the op must take the normal path
// (nothing was done then, and `op` is as it was); after true, `op` may have been moved from.
bool runAllPairsDirectly(OpDesc& op, ncclResult_t* res);

}  // namespace accl
