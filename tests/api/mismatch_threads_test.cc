// Mismatched calls between thread ranks of one process (ACCL_CHECK_MISMATCH=2, the full exchange): different
// counts, different roots, AllReduce against Broadcast, a receive shorter than the send.
// Every rank of a collective (the receiver of a send/receive pair) gets ncclInvalidUsage with
// a log line naming both calls, and the next matched all-reduces are correct.
// tests/mp/mismatch_mp_test.cc runs the same calls across processes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/thread_ranks_util.h"
#include "nccl.h"

namespace {

// Before any ACCL call reads its parameters.
const std::string kLog = "/tmp/accl_mismatch_threads_" + std::to_string(getpid()) + ".log";
const bool kEnvSet = [] {
  setenv("ACCL_CHECK_MISMATCH", "2", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", kLog.c_str(), 1);
  return true;
}();

struct RemoveLogAtExit {
  ~RemoveLogAtExit() { unlink(kLog.c_str()); }
} removeLogAtExit;

constexpr int kRanks = 3;

std::string readLog() {
  std::ifstream in(kLog);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool correctAllReduce(ncclComm_t comm, int rank, size_t count) {
  std::vector<int> buf(count);
  for (size_t i = 0; i < count; i++) buf[i] = (rank + 1) * static_cast<int>(i % 5 + 1);
  if (ncclAllReduce(buf.data(), buf.data(), count, ncclInt32, ncclSum, comm, nullptr) != ncclSuccess) return false;
  for (size_t i = 0; i < count; i++)
    if (buf[i] != 6 * static_cast<int>(i % 5 + 1)) return false;
  return true;
}

// Runs `call` on every rank, then two matched all-reduces; checks results and the log.
void expectMismatch(const std::function<ncclResult_t(int, ncclComm_t)>& call, const std::vector<int>& failing,
                    const std::string& expected) {
  ASSERT_TRUE(kEnvSet);
  std::vector<int> results(kRanks, -1), small(kRanks, 0), large(kRanks, 0);
  accltest::runRanks(kRanks, [&](int rank, ncclComm_t& comm) {
    results[rank] = call(rank, comm);
    small[rank] = correctAllReduce(comm, rank, 4);
    large[rank] = correctAllReduce(comm, rank, 1 << 20);
  });
  std::string log = readLog();
  for (int r = 0; r < kRanks; r++) {
    bool fails = std::find(failing.begin(), failing.end(), r) != failing.end();
    EXPECT_EQ(results[r], fails ? ncclInvalidUsage : ncclSuccess) << "rank " << r;
    EXPECT_TRUE(small[r]) << "rank " << r << ": the next 4-element all-reduce was wrong";
    EXPECT_TRUE(large[r]) << "rank " << r << ": the next 1M-element all-reduce was wrong";
  }
  for (int r : failing) {
    std::string line = "rank " + std::to_string(r) + ": mismatched calls (ACCL_CHECK_MISMATCH): " + expected;
    EXPECT_NE(log.find(line), std::string::npos) << "missing: " << line << "\nlog:\n" << log;
  }
  std::ofstream(kLog, std::ios::trunc).flush();
}

TEST(MismatchThreads, AllReduceCounts) {
  expectMismatch(
      [&](int rank, ncclComm_t comm) {
        std::vector<float> b(2000, 1.0f);
        return ncclAllReduce(b.data(), b.data(), rank == 2 ? 1000 : 2000, ncclFloat, ncclSum, comm, nullptr);
      },
      {0, 1, 2}, "rank 0 called AllReduce(2000 x float32, sum) but rank 2 called AllReduce(1000 x float32, sum)");
}

TEST(MismatchThreads, BroadcastRoots) {
  expectMismatch(
      [](int rank, ncclComm_t comm) {
        std::vector<float> b(1000, 1.0f);
        return ncclBroadcast(b.data(), b.data(), 1000, ncclFloat, rank == 1 ? 1 : 0, comm, nullptr);
      },
      {0, 1, 2}, "rank 0 called Broadcast(1000 x float32, root 0) but rank 1 called Broadcast(1000 x float32, root 1)");
}

TEST(MismatchThreads, AllReduceAgainstBroadcast) {
  expectMismatch(
      [](int rank, ncclComm_t comm) {
        std::vector<float> b(1000, 1.0f);
        return rank == 1 ? ncclBroadcast(b.data(), b.data(), 1000, ncclFloat, 0, comm, nullptr)
                         : ncclAllReduce(b.data(), b.data(), 1000, ncclFloat, ncclSum, comm, nullptr);
      },
      {0, 1, 2}, "rank 0 called AllReduce(1000 x float32, sum) but rank 1 called Broadcast(1000 x float32, root 0)");
}

TEST(MismatchThreads, ReceiveShorterAndLongerThanTheSend) {
  // rank 2 sends 2000 floats to rank 0, which posts 1000; rank 0 sends 100 floats to rank 1,
  // which posts 300: both receivers fail, naming both sizes, and nothing stays queued.
  expectMismatch(
      [](int rank, ncclComm_t comm) {
        std::vector<float> b(2000, 1.0f);
        ncclResult_t r = ncclSuccess;
        if (rank == 2) r = ncclSend(b.data(), 2000, ncclFloat, 0, comm, nullptr);
        if (rank == 0) {
          ncclGroupStart();
          ncclRecv(b.data(), 1000, ncclFloat, 2, comm, nullptr);
          ncclSend(b.data() + 1000, 100, ncclFloat, 1, comm, nullptr);
          r = ncclGroupEnd();
        }
        if (rank == 1) r = ncclRecv(b.data(), 300, ncclFloat, 0, comm, nullptr);
        return r;
      },
      {0, 1}, "receive from rank");
}

}  // namespace
