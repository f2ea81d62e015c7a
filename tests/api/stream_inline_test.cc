// An op on an idle host stream starts on the calling thread (ACCL_STREAM_INLINE_USEC), so one
// whose peers are ready finishes without a hand-off to the stream's thread; what the caller
// cannot finish within the budget the stream's thread finishes, still in stream order.
#include <gtest/gtest.h>
#include <cstdlib>
#include <chrono>
#include <latch>
#include <thread>
#include <vector>
#include "accl.h"
#include "api/thread_ranks_util.h"
#include "nccl.h"

using accltest::runRanks;
using namespace std::chrono_literals;

namespace {

// Numeric parameters are read once per process: set before any communicator exists. A long
// budget makes "the peer arrived within it" certain even on a loaded machine.
const int kBudgetSet = setenv("ACCL_STREAM_INLINE_USEC", "20000000", 0);

TEST(StreamInline, AnOpWhosePeerArrivesWithinTheBudgetIsDoneWhenTheCallReturns) {
  ASSERT_EQ(kBudgetSet, 0);
  runRanks(2, [&](int rank, ncclComm_t& comm) {
    cudaStream_t s;
    ASSERT_EQ(ncclHostStreamCreate(&s), ncclSuccess);
    std::vector<int> buf(1000, rank + 1);
    if (rank == 1) std::this_thread::sleep_for(100ms);  // rank 0's call waits for us on its thread
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, s), ncclSuccess);
    // Done before returning: no synchronize needed to see the result.
    EXPECT_EQ(ncclHostStreamQuery(s), ncclSuccess);
    EXPECT_EQ(buf.front(), 3);
    EXPECT_EQ(buf.back(), 3);
    EXPECT_EQ(ncclHostStreamDestroy(s), ncclSuccess);
  });
}

TEST(StreamInline, WorkQueuedWhileTheCallerRunsTheStreamsHeadRunsAfterIt) {
  runRanks(2, [&](int rank, ncclComm_t& comm) {
    cudaStream_t s;
    ASSERT_EQ(ncclHostStreamCreate(&s), ncclSuccess);
    std::vector<int> buf(1000, rank + 1);
    if (rank == 1) {
      std::this_thread::sleep_for(300ms);
      ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, s), ncclSuccess);
      EXPECT_EQ(ncclHostStreamDestroy(s), ncclSuccess);
      return;
    }
    // While this thread is inside the all-reduce (waiting for rank 1), another thread records
    // an event on the same stream: it must complete only after the all-reduce.
    ncclHostEvent_t ev;
    ASSERT_EQ(ncclHostEventCreate(&ev), ncclSuccess);
    std::thread recorder([&] {
      std::this_thread::sleep_for(50ms);
      ASSERT_EQ(ncclHostEventRecord(ev, s), ncclSuccess);
      EXPECT_EQ(ncclHostEventQuery(ev), ncclInProgress);
      ASSERT_EQ(ncclHostEventSynchronize(ev), ncclSuccess);
      EXPECT_EQ(buf.front(), 3) << "the event completed before the all-reduce queued ahead of it";
    });
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, s), ncclSuccess);
    recorder.join();
    EXPECT_EQ(ncclHostStreamSynchronize(s), ncclSuccess);
    EXPECT_EQ(buf.back(), 3);
    EXPECT_EQ(ncclHostEventDestroy(ev), ncclSuccess);
    EXPECT_EQ(ncclHostStreamDestroy(s), ncclSuccess);
  });
}

}  // namespace
