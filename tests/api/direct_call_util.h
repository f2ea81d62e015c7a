// direct_call_util.h: checks that hold for every direct call (sched/board_fast_path.h on the
// shared-memory board, sched/pairs_fast_path.h over sockets), whichever transport the test's
// environment gives: issue order against a pending host-stream op, and a wait for a peer that
// never comes ended by an error, not a hang. Each runs 2 thread ranks with a small all-reduce.
#pragma once

namespace accltest {

// Rank 0 queues an all-reduce on its host stream that cannot finish until rank 1 joins, then
// calls one on the NULL stream: that one must run second on both ranks (issue order), so each
// output holds its own operation's sum.
void expectNullStreamCallRunsAfterPendingHostStreamOp();

// Rank 1 destroys its communicator instead of joining: rank 0's waiting call fails with
// ncclRemoteError naming rank 1. `connectFirst`: one call first, so connections made on first
// use exist (a pair never used gives the waiting rank no EOF to see: docs/design.md).
void expectPeerThatDestroysItsCommunicatorEndsTheWait(bool connectFirst);

// ncclCommAbort from another thread ends rank 0's call waiting for a rank 1 that never joins.
void expectAbortFromAnotherThreadEndsTheWait(bool connectFirst);

}  // namespace accltest
