// Small all-reduces and all-gathers run straight on the ShmDirect board from the call
// (sched/board_fast_path.h). What must hold whichever way a call ends: results equal the
// reference when peers are late and the executor finishes the operation, a NULL-stream call
// made while a host-stream op of the same communicator is pending runs after it, and a peer
// that leaves or an abort ends a waiting call with an error instead of a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "accl.h"
#include "api/direct_call_util.h"
#include "api/thread_ranks_util.h"
#include "nccl.h"

using accltest::lastError;
using accltest::runRanks;
using namespace std::chrono_literals;

namespace {

constexpr int kRounds = 12;

// Rank `late` of round i sleeps before calling: long enough (3 ms) that the others outwait
// the direct path's budget and hand the operation to the executor, which must fold the posts
// already taken and the late one exactly like a call that never waited.
int lateRank(int round, int n) { return round % n; }

void allReduceAndGatherWithLateRanks(int n, bool hostStream) {
  runRanks(n, [&](int rank, ncclComm_t& comm) {
    cudaStream_t s = nullptr;
    if (hostStream) {
      ASSERT_EQ(ncclHostStreamCreate(&s), ncclSuccess);
    }
    for (int round = 0; round < kRounds; round++) {
      const int count = 1 + 7 * round;  // odd sizes too
      std::vector<int32_t> in(count), out(count, -1);
      for (int i = 0; i < count; i++) in[i] = (rank + 1) * 1000 + i + round;
      std::vector<float> avgIn(count), avgOut(count, -1.0f);
      for (int i = 0; i < count; i++) avgIn[i] = static_cast<float>(rank * 2 + i);
      std::vector<int32_t> gathered(static_cast<size_t>(count) * n, -1);

      if (rank == lateRank(round, n)) std::this_thread::sleep_for(3ms);
      ASSERT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, s), ncclSuccess);
      ASSERT_EQ(ncclAllReduce(avgIn.data(), avgOut.data(), count, ncclFloat32, ncclAvg, comm, s), ncclSuccess);
      if (rank == lateRank(round + 1, n)) std::this_thread::sleep_for(3ms);
      ASSERT_EQ(ncclAllGather(in.data(), gathered.data(), count, ncclInt32, comm, s), ncclSuccess);
      if (hostStream) {
        ASSERT_EQ(ncclHostStreamSynchronize(s), ncclSuccess);
      }

      for (int i = 0; i < count; i++) {
        int32_t sum = 0;
        float avgSum = 0.0f;
        for (int r = 0; r < n; r++) {
          sum += (r + 1) * 1000 + i + round;
          avgSum += static_cast<float>(r * 2 + i);  // small integers: exact in any order
        }
        ASSERT_EQ(out[i], sum) << "all-reduce, round " << round << " element " << i;
        ASSERT_EQ(avgOut[i], avgSum / static_cast<float>(n)) << "avg, round " << round << " element " << i;
        for (int r = 0; r < n; r++)
          ASSERT_EQ(gathered[static_cast<size_t>(r) * count + i], (r + 1) * 1000 + i + round)
              << "all-gather, round " << round << " piece of rank " << r;
      }
    }
    if (hostStream) {
      EXPECT_EQ(ncclHostStreamDestroy(s), ncclSuccess);
    }
  });
}

TEST(BoardDirect, LateRanksOnTheNullStreamStillGiveExactResults) { allReduceAndGatherWithLateRanks(3, false); }

TEST(BoardDirect, LateRanksOnAHostStreamStillGiveExactResults) { allReduceAndGatherWithLateRanks(3, true); }

// Issue order, and waits for a peer that never comes (tests/api/direct_call_util.h); ranks
// on one host: the board carries these calls.
TEST(BoardDirect, ANullStreamCallWaitsForTheHostStreamOpIssuedBeforeIt) {
  accltest::expectNullStreamCallRunsAfterPendingHostStreamOp();
}

TEST(BoardDirect, APeerThatDestroysItsCommunicatorEndsTheWaitWithAnError) {
  accltest::expectPeerThatDestroysItsCommunicatorEndsTheWait(false);
}

TEST(BoardDirect, AbortFromAnotherThreadEndsAWaitingCall) { accltest::expectAbortFromAnotherThreadEndsTheWait(false); }

}  // namespace
