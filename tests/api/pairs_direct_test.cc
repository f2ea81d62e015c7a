// Small AllPairs all-reduces over sockets run straight from the call (sched/pairs_fast_path.h).
// What must hold whichever way a call ends: exact results for every type and op, in place and
// out of place, also when a peer is late and the executor finishes the operation from the step
// the call reached; small direct calls interleaved with large ones that go through the helper
// threads on the same connections; a peer that leaves or an abort ends a waiting call with an
// error instead of a hang. (A killed peer process: tests/mp/peer_death_log_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
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

// Every rank's connections are sockets (no board, so the tuner picks AllPairs for small
// all-reduces). Set before any communicator reads it.
const bool kSocketsOnly = [] {
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("NCCL_NET_PLUGIN", "none", 1);
  return true;
}();

// Input element i of rank r; small integers, so sums, products and averages are exact.
int32_t inputOf(int r, int i, int round) { return (r + 1) * 3 + (i % 5) + round % 3; }

template <typename T>
T reference(ncclRedOp_t op, int n, int i, int round) {
  T acc = static_cast<T>(inputOf(0, i, round));
  for (int r = 1; r < n; r++) {
    const T x = static_cast<T>(inputOf(r, i, round));
    switch (op) {
      case ncclSum: acc = static_cast<T>(acc + x); break;
      case ncclProd: acc = static_cast<T>(acc * x); break;
      case ncclMax: acc = std::max(acc, x); break;
      case ncclMin: acc = std::min(acc, x); break;
      case ncclAvg: acc = static_cast<T>(acc + x); break;
      default: break;
    }
  }
  if (op == ncclAvg) acc = static_cast<T>(acc / static_cast<T>(n));
  return acc;
}

template <typename T>
void checkOne(int rank, int n, ncclComm_t comm, ncclDataType_t type, ncclRedOp_t op, int count, int round,
              bool inPlace, cudaStream_t stream = nullptr) {
  std::vector<T> in(count), out(count, static_cast<T>(-1));
  for (int i = 0; i < count; i++) in[i] = static_cast<T>(inputOf(rank, i, round));
  T* dst = inPlace ? in.data() : out.data();
  ASSERT_EQ(ncclAllReduce(in.data(), dst, count, type, op, comm, stream), ncclSuccess) << lastError();
  if (stream) {
    ASSERT_EQ(ncclHostStreamSynchronize(stream), ncclSuccess) << lastError();
  }
  for (int i = 0; i < count; i++)
    ASSERT_EQ(dst[i], reference<T>(op, n, i, round))
        << "type " << type << " op " << op << " count " << count << " round " << round << " element " << i
        << (inPlace ? " in place" : "");
}

// Every rank calls the same sequence; rank `late` of a round sleeps first (3 ms: longer than
// the direct wait), so the others hand their half-done calls to the executor.
void typesOpsAndLateRanks(int n, bool hostStream = false) {
  runRanks(n, [&](int rank, ncclComm_t& comm) {
    cudaStream_t st = nullptr;
    if (hostStream) {
      ASSERT_EQ(ncclHostStreamCreate(&st), ncclSuccess);
    }
    for (int round = 0; round < 12; round++) {
      const int count = 1 + 5 * round;  // odd sizes: the stream is padded between ops
      const bool inPlace = round % 2 == 1;
      if (rank == round % n && round % 3 == 0) std::this_thread::sleep_for(3ms);
      checkOne<int32_t>(rank, n, comm, ncclInt32, ncclSum, count, round, inPlace, st);
      checkOne<int8_t>(rank, n, comm, ncclInt8, ncclMax, count, round, inPlace, st);
      checkOne<uint8_t>(rank, n, comm, ncclUint8, ncclMin, count, round, !inPlace, st);
      if (rank == (round + 1) % n && round % 3 == 1) std::this_thread::sleep_for(3ms);
      checkOne<double>(rank, n, comm, ncclFloat64, ncclProd, count, round, inPlace, st);
      checkOne<float>(rank, n, comm, ncclFloat32, ncclAvg, count, round, !inPlace, st);
      checkOne<int64_t>(rank, n, comm, ncclInt64, ncclSum, count, round, inPlace, st);
    }
    if (hostStream) {
      EXPECT_EQ(ncclHostStreamDestroy(st), ncclSuccess);
    }
  });
}

TEST(PairsDirect, TwoRanksGiveExactResultsForTypesOpsAndLateRanks) { typesOpsAndLateRanks(2); }

// On an ACCL host stream: started on the calling thread, finished by the stream's worker
// when a peer is late.
TEST(PairsDirect, TwoRanksOnAHostStreamGiveExactResultsForTypesOpsAndLateRanks) { typesOpsAndLateRanks(2, true); }

TEST(PairsDirect, ANullStreamCallWaitsForTheHostStreamOpIssuedBeforeIt) {
  accltest::expectNullStreamCallRunsAfterPendingHostStreamOp();  // tests/api/direct_call_util.h
}

// Three ranks: ranks >= 2 first receive x0 into the output, so in place they fold their own
// input from a saved copy (the step the executor resumes after a hand-over must see it).
TEST(PairsDirect, ThreeRanksGiveExactResultsForTypesOpsAndLateRanks) {
  setenv("NCCL_ALGO", "AllPairs", 1);  // the tuner keeps AllPairs to 2 ranks
  typesOpsAndLateRanks(3);
  unsetenv("NCCL_ALGO");
}

// Small calls (direct, sent inline) between large ones (ring, moved by the helper threads) on
// the same connections: the byte stream must stay in order whoever writes it.
TEST(PairsDirect, SmallDirectCallsInterleavedWithLargeOnesGiveExactResults) {
  runRanks(2, [&](int rank, ncclComm_t& comm) {
    const int big = 1 << 20;
    std::vector<int32_t> large(big), largeOut(big);
    for (int round = 0; round < 6; round++) {
      for (int i = 0; i < big; i++) large[i] = inputOf(rank, i, round);
      ASSERT_EQ(ncclAllReduce(large.data(), largeOut.data(), big, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
      for (int k = 0; k < 4; k++) checkOne<int32_t>(rank, 2, comm, ncclInt32, ncclSum, 3 + k, round + k, k % 2);
      for (int i = 0; i < big; i += 4099) ASSERT_EQ(largeOut[i], reference<int32_t>(ncclSum, 2, i, round)) << i;
      ASSERT_EQ(largeOut[big - 1], reference<int32_t>(ncclSum, 2, big - 1, round));
    }
  });
}

// Waits for a peer that never comes (tests/api/direct_call_util.h). One call first, so the
// socket pair is connected (a lower rank that never used it gives the higher rank no EOF).
TEST(PairsDirect, APeerThatDestroysItsCommunicatorEndsTheWaitWithAnError) {
  accltest::expectPeerThatDestroysItsCommunicatorEndsTheWait(true);
}

TEST(PairsDirect, AbortFromAnotherThreadEndsAWaitingCall) { accltest::expectAbortFromAnotherThreadEndsTheWait(true); }

}  // namespace
