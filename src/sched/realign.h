// realign.h: after mismatched calls, puts every connection's byte stream back at a call
// boundary so the communicator stays usable (ACCL_CHECK_MISMATCH=1, the default).
//
// Every rank takes part, in its executor: the rank that saw the mismatch (or an earlier call's
// stamp nobody read) asks for it, and every other rank joins when it learns of it, in the call
// it is blocked in or at the start of its next call. Each rank sends all the others a note
// (comm/realign_mailbox.h, through the status servers): which calls it is in, and on each
// connection the stream position where the bytes it sent for the calls up to the mismatched
// one end. With every note in, each rank discards what it has not read of those bytes, moves
// its shared-memory board past every board operation of those calls, and decides from the
// notes, the same way on every rank, which call fails:
//   - a rank in the mismatched call fails it (ncclInvalidUsage);
//   - a call missing on some rank (a rank ahead is in the very call, but numbered one later,
//     that a rank in the mismatched call is in): every rank's call fails, and every rank
//     numbers its next call as the rank furthest ahead does, so the calls pair up again;
//   - a rank already in a later call (it finished the mismatched one, or had no part in it)
//     carries on with it, unless no rank is in the mismatched call any more (every rank
//     finished it, and the mismatch only showed in the data a later call met): then that later
//     call fails on every rank instead, so that one call reports the mismatch everywhere.
// Whatever fails, the next call starts on aligned streams and its result is exact.
#pragma once
#include <cstdint>
#include <vector>
#include "sched/work.h"

namespace accl {

enum class RealignOutcome {
  NotYet,        // no realignment for this rank's calls yet: it is in an earlier one
  CallFails,     // the call this rank is in fails with ncclInvalidUsage (WARNed)
  CallCarriesOn  // the call goes on, on realigned streams
};

// Where a rank stands when it joins: the calls it is in (stamp orders, first..last), the
// lanes of its work (null: a direct call without lanes) and its board position before them.
struct RealignSite {
  uint64_t firstOrder = ~uint64_t(0);
  uint64_t lastOrder = ~uint64_t(0);
  std::vector<std::vector<Lane>>* phases = nullptr;
  uint64_t boardAtStart = 0;
  const CallStamp* current = nullptr;  // the first call's stamp (null: none)
};

// The site of work `w` (its ops' stamps, its lanes).
RealignSite realignSiteOf(CommWork& w);
// Runs the realignment the communicator's mailbox wants, blocking until every rank has
// joined and every stream is realigned. An error (abort, a rank gone, ACCL_TIMEOUT, notes
// that do not agree) fails the communicator, WARNed: it must then be destroyed and recreated.
ncclResult_t realignConnections(Comm& c, RealignSite& site, RealignOutcome* out);

}  // namespace accl
