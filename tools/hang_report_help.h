// hang_report_help.h: the text `accl-info --hang-report` prints: how to read ACCL's hang
// report and hang summary (src/sched/hang_report.cc, src/sched/executor.cc).
#pragma once

namespace accl::tools {

inline const char* kHangReportHelp = R"(How to read an ACCL hang report
================================

When does ACCL print one?
  * ACCL_HANG_WARN=S (default 300): an operation made no progress for S seconds. Printed once;
    the operation keeps waiting (frameworks set their own timeouts).
  * ACCL_TIMEOUT=S (default off): after S seconds without progress the operation fails with
    ncclRemoteError and the communicator carries that async error.
  * ncclCommAbort while an operation is blocked.
  * kill -USR1 <pid> when the process runs with ACCL_HANG_REPORT=1.

Per-rank block (every blocked rank prints its own):
  ACCL hang report: rank 1/4 comm 0x55d0... op #17: AllReduce(16777216 x float32);
  no progress for 3004 ms; phase 1/1
    lane 0: recv+reduce+send 0/131072 bytes, waiting for data from rank 0

  rank 1/4       this rank and the communicator size
  op #17         the communicator's operation sequence number (0-based, per communicator):
                 ranks with different numbers are executing different operations
  AllReduce(...) the operation(s) of this group call: collective, count and datatype
                 (peer/root for point-to-point and rooted collectives)
  phase a/b      collectives run in phase 1; the group's sends/receives in the last phase
  lane N         one per concurrent stream of steps (a p2p batch has one per peer and
                 direction). The step name, how far it got, and whom it waits for:
                 "waiting for data from rank X"   X has not sent what this step needs
                 "waiting for rank Y to drain"    Y has not consumed what we sent

Job summary (printed once by the lowest blocked rank, or by every rank that times out):
  ACCL hang summary for comm 0x55d0... (4 ranks), gathered by rank 0:
    rank 0: 1 of 2 ops done, blocked: op #1: AllReduce(...) ...
    rank 2: 1 of 1 ops done, idle (not inside an operation of this communicator)
    rank 3: no answer from 10.0.0.3:41233 (process gone, hung before init, or unreachable)
    => behind (not in this op): rank 2; gone: rank 3

  "idle" ranks never called the operation the others wait in: look at that rank's code
  path (a skipped or reordered collective, an exception, a different op count).
  "no answer" ranks are dead or unreachable: check that host and its logs.
  Blocked ranks whose "waiting for data from rank X" chain ends at an idle or gone rank
  are victims, not culprits.

Related: ACCL_TRACE_FILE=/tmp/trace.%h.%p.json writes each communicator's last operations as
Chrome-trace JSON (open it in Perfetto) when the communicator is destroyed or aborted.
)";

}  // namespace accl::tools
