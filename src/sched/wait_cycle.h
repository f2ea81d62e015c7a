// wait_cycle.h: mismatched calls that no data reveals. When every rank waits for another and
// none sends (broadcasts naming different roots, a receive against a receive, a broadcast
// against a receive), no call stamp travels and the stamp checks (sched/call_stamp.h) see
// nothing: every rank would wait until killed. So a rank blocked for kWaitNoteUsec publishes a
// wait note (its calls, whether it could still send, and how far each of its byte streams got;
// Comm::waitNote, served by the status server), and rank 0, while blocked itself, gathers every
// rank's note every kCyclePollUsec. When every rank is blocked, none waits to send or on its
// device, every byte sent has been read, every rank made as many board operations as the
// others, and nothing changed since the previous look, the calls form a waiting cycle: rank 0
// asks for a realignment flagged kRealignWaitCycle (sched/realign.h), which fails the call on
// every rank with ncclInvalidUsage, naming every rank's call, and leaves the communicator
// usable. About 0.75 s from the start of the wait.
// Only with call stamps (ACCL_CHECK_MISMATCH=1, the default).
#pragma once
#include <cstdint>
#include "sched/work.h"

namespace accl {

constexpr int64_t kWaitNoteUsec = 250000;
constexpr int64_t kCyclePollUsec = 250000;

// While `w` is blocked: refreshes this rank's wait note once it has been stalled kWaitNoteUsec.
void publishWaitNote(CommWork& w, int64_t nowUsec);
// On rank 0, while `w` is blocked: gathers the notes (at most every kCyclePollUsec) and asks
// for the realignment when they show a waiting cycle twice in a row. True when it asked.
bool checkWaitCycle(CommWork& w, int64_t nowUsec);
// Clears the note when the rank's work finishes (statusMu held by the caller).
inline void clearWaitNote(Comm& c) { c.waitNote.clear(); }

}  // namespace accl
