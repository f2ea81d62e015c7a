// Socket connections are made when a pair is first used (transports/net/net_transport.h):
// init connects nobody; a pair that no call uses is never connected; either end may use the
// pair first, long before the other (the higher rank's connection waits for the lower rank's
// sockets); and data the higher rank sends before the lower rank ever looks arrives intact.
// Shared memory is off, so every pair is a socket pair; the log says which pairs connected.
// Each test runs its ranks in a child process of its own: the logger opens NCCL_DEBUG_FILE
// once per process, so only a fresh process writes this test's log.
#include <gtest/gtest.h>
#include <unistd.h>
#include <chrono>
#include <string>
#include <thread>
#include <vector>
#include "api/thread_ranks_util.h"
#include "nccl.h"
#include "common/rank_runner.h"
#include "common/text_file.h"

using accl_test::ChildResult;
using accl_test::childRole;
using accl_test::runChildProcesses;
using accltest::lastError;
using accltest::runRanks;

namespace {

using accl_test::readFile;
using accl_test::occurrences;

struct SocketRun {
  bool ok = false;
  std::string report;  // the child's exit status and output tail, when not ok
  std::string log;     // its INIT log
};

// Runs the current test's body on `nranks` thread ranks in a child process, sockets only.
SocketRun runSocketsOnly(int nranks) {
  const std::string path = testing::TempDir() + "accl_lazy_" + std::to_string(getpid()) + "_" +
                           testing::UnitTest::GetInstance()->current_test_info()->name() + ".log";
  ChildResult child = runChildProcesses(1, false, nranks,
                                        {"NCCL_SHM_DISABLE=1", "NCCL_NET_PLUGIN=none", "NCCL_DEBUG=INFO",
                                         "NCCL_DEBUG_SUBSYS=INIT", "NCCL_DEBUG_FILE=" + path},
                                        60);
  SocketRun run{child.ok, child.report, readFile(path)};
  unlink(path.c_str());
  return run;
}

// `from` sends `n` ints (value 1000 * from + i) to `to`; each first sleeps its delay.
void sendRecv(int rank, ncclComm_t comm, int from, int to, size_t n, int sendDelayMs, int recvDelayMs) {
  if (rank == from) {
    std::this_thread::sleep_for(std::chrono::milliseconds(sendDelayMs));
    std::vector<int> buf(n);
    for (size_t i = 0; i < n; i++) buf[i] = static_cast<int>(1000 * from + i);
    ASSERT_EQ(ncclSend(buf.data(), n, ncclInt32, to, comm, nullptr), ncclSuccess) << lastError();
  } else if (rank == to) {
    std::this_thread::sleep_for(std::chrono::milliseconds(recvDelayMs));
    std::vector<int> buf(n, -1);
    ASSERT_EQ(ncclRecv(buf.data(), n, ncclInt32, from, comm, nullptr), ncclSuccess) << lastError();
    for (size_t i = 0; i < n; i++) ASSERT_EQ(buf[i], static_cast<int>(1000 * from + i)) << "element " << i;
  }
}

}  // namespace

TEST(LazySockets, OnlyThePairsACallUsesAreConnected) {
  if (const auto* role = childRole()) {
    runRanks(role->nranks, [](int rank, ncclComm_t& comm) { sendRecv(rank, comm, 0, 1, 1000, 0, 0); });
    return;
  }
  SocketRun run = runSocketsOnly(4);
  EXPECT_TRUE(run.ok) << run.report << "\nlog:\n" << run.log;
  const std::string& text = run.log;
  EXPECT_EQ(occurrences(text, "NET (3 peers)"), 4) << text;  // every pair could use sockets
  // Ranks 0 and 1 connected to each other, and nobody else to anybody.
  EXPECT_EQ(occurrences(text, "rank 0: connected to rank 1 "), 1) << text;
  EXPECT_EQ(occurrences(text, "rank 1: connected to rank 0 "), 1) << text;
  EXPECT_EQ(occurrences(text, ": connected to rank"), 2) << text;
}

TEST(LazySockets, EitherEndMayUseThePairFirst) {
  if (const auto* role = childRole()) {
    // More than the 2 MiB staging ring, so the sender must wait for the receiver to drain it.
    const size_t n = 3 << 18;
    runRanks(role->nranks, [n](int rank, ncclComm_t& comm) {
      sendRecv(rank, comm, 2, 0, n, 0, 300);  // the higher rank sends; the lower looks 300 ms later
      sendRecv(rank, comm, 1, 2, n, 300, 0);  // the higher rank waits; the lower sends 300 ms later
      sendRecv(rank, comm, 0, 1, n, 0, 300);  // the lower rank sends; the higher looks 300 ms later
    });
    return;
  }
  SocketRun run = runSocketsOnly(3);
  EXPECT_TRUE(run.ok) << run.report << "\nlog:\n" << run.log;
  EXPECT_EQ(occurrences(run.log, ": connected to rank"), 6) << run.log;
}
