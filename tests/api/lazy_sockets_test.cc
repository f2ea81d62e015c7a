// Socket connections are made when a pair is first used (transports/net/net_transport.h):
// init connects nobody; a pair that no call uses is never connected; either end may use the
// pair first, long before the other (the higher rank's connection waits for the lower rank's
// sockets); and data the higher rank sends before the lower rank ever looks arrives intact.
// Shared memory is off, so every pair is a socket pair; the log says which pairs connected.
#include <gtest/gtest.h>
#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "api/thread_ranks_util.h"
#include "nccl.h"
#include "common/text_file.h"

using accltest::lastError;
using accltest::runRanks;

namespace {

using accl_test::readFile;
using accl_test::occurrences;

struct SocketLog {
  SocketLog() {
    path = testing::TempDir() + "accl_lazy_" + std::to_string(getpid()) + ".log";
    setenv("NCCL_SHM_DISABLE", "1", 1);
    setenv("NCCL_NET_PLUGIN", "none", 1);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
    setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
  }
  ~SocketLog() { unlink(path.c_str()); }
  std::string path;
};

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
  SocketLog log;
  runRanks(4, [](int rank, ncclComm_t& comm) { sendRecv(rank, comm, 0, 1, 1000, 0, 0); });
  std::string text = readFile(log.path);
  EXPECT_EQ(occurrences(text, "NET (3 peers)"), 4) << text;  // every pair could use sockets
  // Ranks 0 and 1 connected to each other, and nobody else to anybody.
  EXPECT_EQ(occurrences(text, "rank 0: connected to rank 1 "), 1) << text;
  EXPECT_EQ(occurrences(text, "rank 1: connected to rank 0 "), 1) << text;
  EXPECT_EQ(occurrences(text, ": connected to rank"), 2) << text;
}

TEST(LazySockets, EitherEndMayUseThePairFirst) {
  SocketLog log;
  // More than the 2 MiB staging ring, so the sender must wait for the receiver to drain it.
  const size_t n = 3 << 18;
  runRanks(3, [n](int rank, ncclComm_t& comm) {
    sendRecv(rank, comm, 2, 0, n, 0, 300);  // the higher rank sends; the lower looks 300 ms later
    sendRecv(rank, comm, 1, 2, n, 300, 0);  // the higher rank waits; the lower sends 300 ms later
    sendRecv(rank, comm, 0, 1, n, 0, 300);  // the lower rank sends; the higher looks 300 ms later
  });
  EXPECT_EQ(occurrences(readFile(log.path), ": connected to rank"), 6);
}
