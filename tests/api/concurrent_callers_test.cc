// Two threads calling one communicator at once (NCCL forbids it) are detected: while one
// thread is inside a call, another thread's call on the same communicator fails with
// ncclInvalidUsage and a message naming the rule, instead of being mixed into the call
// sequence; the first call and the matched calls afterwards are exact (issue #43, item 4).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "api/thread_ranks_util.h"
#include "nccl.h"

namespace {

constexpr int kRanks = 2;
constexpr size_t kCount = 1 << 20;

// Sums (rank + 1) * (i % 7 + 1) over the ranks; true when every element is exact.
bool exactAllReduce(ncclComm_t comm, int rank) {
  std::vector<int> buf(kCount);
  for (size_t i = 0; i < kCount; i++) buf[i] = (rank + 1) * static_cast<int>(i % 7 + 1);
  if (ncclAllReduce(buf.data(), buf.data(), kCount, ncclInt32, ncclSum, comm, nullptr) != ncclSuccess) return false;
  for (size_t i = 0; i < kCount; i++)
    if (buf[i] != 3 * static_cast<int>(i % 7 + 1)) return false;
  return true;
}

}  // namespace

TEST(ConcurrentCallers, ASecondThreadOnOneCommunicatorIsRefusedAndNothingIsMixed) {
  std::atomic<bool> secondTried{false}, firstReturned{false};
  std::atomic<int> secondResult{-1};
  std::string secondError;
  std::vector<int> first(kRanks, 0), after(kRanks, 0);
  accltest::runRanks(kRanks, [&](int rank, ncclComm_t& comm) {
    if (rank == 0) {
      // Rank 1 calls only once the second thread has tried, so the first call is still
      // waiting for it when the second thread calls.
      std::thread second([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        std::vector<int> other(kCount, 100);
        secondResult = ncclAllReduce(other.data(), other.data(), kCount, ncclInt32, ncclSum, comm, nullptr);
        secondError = accltest::lastError();
        EXPECT_FALSE(firstReturned.load()) << "the first call returned before the second thread called";
        secondTried = true;
      });
      first[rank] = exactAllReduce(comm, rank);
      firstReturned = true;
      second.join();
    } else {
      while (!secondTried.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      first[rank] = exactAllReduce(comm, rank);
      // Had the second call been taken, rank 0 made one call more: match it, so nothing hangs.
      if (secondResult.load() == ncclSuccess) (void)exactAllReduce(comm, rank);
    }
    after[rank] = exactAllReduce(comm, rank);
  });
  EXPECT_EQ(secondResult.load(), ncclInvalidUsage);
  EXPECT_NE(secondError.find("another thread"), std::string::npos) << secondError;
  EXPECT_NE(secondError.find("NCCL forbids"), std::string::npos) << secondError;
  for (int r = 0; r < kRanks; r++) {
    EXPECT_TRUE(first[r]) << "rank " << r << ": the first thread's all-reduce was wrong";
    EXPECT_TRUE(after[r]) << "rank " << r << ": the next matched all-reduce was wrong";
  }
}

// Taking turns (one thread after another, never at once) is allowed, as in NCCL.
TEST(ConcurrentCallers, ThreadsTakingTurnsOnOneCommunicatorAreFine) {
  std::vector<int> ok(kRanks, 0);
  accltest::runRanks(kRanks, [&](int rank, ncclComm_t& comm) {
    int good = 0;
    for (int turn = 0; turn < 3; turn++) {
      std::thread t([&] { good += exactAllReduce(comm, rank); });
      t.join();
    }
    ok[rank] = good == 3;
  });
  for (int r = 0; r < kRanks; r++) EXPECT_TRUE(ok[r]) << "rank " << r;
}
