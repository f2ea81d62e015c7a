// ncclCommAbort from another thread unblocks a collective that can never complete.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>
#include <vector>

#include "accl.h"
#include "api/thread_ranks_util.h"
#include "nccl.h"

using accltest::lastError;
using accltest::runRanks;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Rank 1 never calls the allreduce, so rank 0 blocks in it (NULL stream) until a third thread
// aborts rank 0's comm: the abort returns within 2 s and the blocked call returns an error.
TEST(Abort, AbortFromAnotherThreadUnblocksAStuckAllReduceWithinTwoSeconds) {
  std::latch rank0Done(1);
  runRanks(2, [&](int rank, ncclComm_t& comm) {
    if (rank == 1) {
      rank0Done.wait();  // stays alive, just never joins the collective
      return;
    }
    std::atomic<bool> returned{false};
    std::thread aborter([&] {
      std::this_thread::sleep_for(300ms);
      EXPECT_FALSE(returned.load()) << "the allreduce finished without its peer";
      auto t0 = Clock::now();
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      EXPECT_LT(Clock::now() - t0, 2s) << "ncclCommAbort took too long";
    });
    std::vector<float> buf(1 << 20, 1.0f);
    auto t0 = Clock::now();
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr);
    returned = true;
    auto waited = Clock::now() - t0;
    aborter.join();
    comm = nullptr;  // aborted: freed
    EXPECT_NE(r, ncclSuccess) << "a collective interrupted by abort must report an error";
    EXPECT_NE(r, ncclInProgress);
    EXPECT_LT(waited, 2300ms);
    rank0Done.count_down();
  });
}

// Same on a host stream: the queued op fails, the stream reports the error, and the stream
// itself stays usable for synchronize/destroy.
TEST(Abort, AbortFailsAStuckOperationQueuedOnAHostStream) {
  std::latch rank0Done(1);
  runRanks(2, [&](int rank, ncclComm_t& comm) {
    if (rank == 1) {
      rank0Done.wait();
      return;
    }
    cudaStream_t s;
    ASSERT_EQ(ncclHostStreamCreate(&s), ncclSuccess);
    std::vector<int> buf(1000, 1);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, s), ncclSuccess);
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(ncclHostStreamQuery(s), ncclInProgress);
    auto t0 = Clock::now();
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    comm = nullptr;
    EXPECT_LT(Clock::now() - t0, 2s);
    ncclResult_t r = ncclHostStreamSynchronize(s);
    EXPECT_NE(r, ncclSuccess);
    EXPECT_NE(r, ncclInProgress);
    EXPECT_EQ(ncclHostStreamDestroy(s), ncclSuccess);
    rank0Done.count_down();
  });
}

// A peer that aborts (rather than never arriving) makes the survivor's collective fail, and
// the survivor's ncclCommGetAsyncError then reports the error.
TEST(Abort, PeerAbortFailsTheSurvivorsCollectiveAndSetsItsAsyncError) {
  std::latch rank0Started(1);
  runRanks(2, [&](int rank, ncclComm_t& comm) {
    if (rank == 1) {
      rank0Started.wait();
      std::this_thread::sleep_for(200ms);
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      comm = nullptr;
      return;
    }
    std::vector<float> buf(1 << 16, 1.0f);
    rank0Started.count_down();
    auto t0 = Clock::now();
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr);
    EXPECT_TRUE(r == ncclRemoteError || r == ncclSystemError) << "got " << r << ": " << lastError();
    EXPECT_LT(Clock::now() - t0, 10s);
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_TRUE(async == ncclRemoteError || async == ncclSystemError) << "async error " << async;
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    comm = nullptr;
  });
}
