// Mismatched calls across rank processes (ACCL_CHECK_MISMATCH=2, the full exchange): AllReduce with different
// counts, Broadcast with different roots, AllReduce on some ranks and Broadcast on others,
// and a receive posted for fewer bytes than were sent. Each must fail (every rank of a
// collective; the receiver of a point-to-point transfer) with ncclInvalidUsage and a log
// line naming both calls, and the NEXT, correctly matched calls must give correct results:
// the byte stream between the ranks stays aligned. Over shared memory and sockets.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nccl.h"
#include "common/text_file.h"
#include "mp/forked_ranks.h"

namespace {

constexpr int kRanks = 3;

enum class Kind { AllReduceCount, BroadcastRoot, AllReduceVsBroadcast, RecvShorterThanSend };

struct Shared {
  accl_forked::SharedId uid;
  int mismatched[kRanks];     // result of the mismatched call
  int nextSmall[kRanks];      // 1: the next 4-float all-reduce was correct
  int nextLarge[kRanks];      // 1: the following 1M-float all-reduce was correct
};

using accl_test::readFile;

ncclResult_t mismatchedCall(Kind kind, int rank, ncclComm_t comm) {
  std::vector<float> buf(4000, 1.0f);
  switch (kind) {
    case Kind::AllReduceCount:
      return ncclAllReduce(buf.data(), buf.data(), rank == 0 ? 1000 : 2000, ncclFloat, ncclSum, comm, nullptr);
    case Kind::BroadcastRoot:
      return ncclBroadcast(buf.data(), buf.data(), 1000, ncclFloat, rank == 0 ? 0 : 1, comm, nullptr);
    case Kind::AllReduceVsBroadcast:
      return rank == 0 ? ncclAllReduce(buf.data(), buf.data(), 1000, ncclFloat, ncclSum, comm, nullptr)
                       : ncclBroadcast(buf.data(), buf.data(), 1000, ncclFloat, 0, comm, nullptr);
    case Kind::RecvShorterThanSend:
      // rank 0 sends 2000 floats to rank 1, which posts a receive for 1000; rank 2 sits out.
      if (rank == 0) return ncclSend(buf.data(), 2000, ncclFloat, 1, comm, nullptr);
      if (rank == 1) return ncclRecv(buf.data(), 1000, ncclFloat, 0, comm, nullptr);
      return ncclSuccess;
  }
  return ncclInternalError;
}

bool correctAllReduce(ncclComm_t comm, int rank, size_t count) {
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; i++) buf[i] = static_cast<float>((rank + 1) * (i % 5 + 1));
  if (ncclAllReduce(buf.data(), buf.data(), count, ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) return false;
  for (size_t i = 0; i < count; i++)
    if (buf[i] != static_cast<float>(6 * (i % 5 + 1))) return false;  // (1+2+3) * (i%5+1)
  return true;
}

[[noreturn]] void rankMain(Shared* sh, int rank, Kind kind, bool sockets, const std::string& logPath) {
  alarm(30);  // a hang kills the rank with SIGALRM (and fails the test)
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", logPath.c_str(), 1);
  setenv("ACCL_CHECK_MISMATCH", "2", 1);
  if (sockets) setenv("NCCL_SHM_DISABLE", "1", 1);
  ncclResetDebugInit();
  ncclComm_t comm = accl_forked::initForkedRank(&sh->uid, kRanks, rank);
  sh->mismatched[rank] = mismatchedCall(kind, rank, comm);
  sh->nextSmall[rank] = correctAllReduce(comm, rank, 4);
  sh->nextLarge[rank] = correctAllReduce(comm, rank, 1 << 20);
  ncclCommDestroy(comm);
  _exit(0);
}

struct Case {
  Kind kind;
  bool sockets;
  const char* expectedLog;  // what every failing rank's log must contain
};

class Mismatch : public testing::TestWithParam<Case> {};

TEST_P(Mismatch, EveryRankFailsWithInvalidUsageNamingBothCallsAndTheNextCallsAreCorrect) {
  const Case& c = GetParam();
  auto* sh = accl_forked::mapShared<Shared>();
  ASSERT_NE(sh, nullptr);
  std::string base = testing::TempDir() + "accl_mismatch_" + std::to_string(getpid());
  std::vector<pid_t> pids;
  ASSERT_NO_FATAL_FAILURE(accl_forked::forkRanks(
      kRanks, [&](int r) { rankMain(sh, r, c.kind, c.sockets, base + "." + std::to_string(r) + ".log"); }, &pids));
  for (int r = 0; r < kRanks; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << r << " status " << status << " (SIGALRM = it hung)";
  }
  const bool p2p = c.kind == Kind::RecvShorterThanSend;
  for (int r = 0; r < kRanks; r++) {
    std::string path = base + "." + std::to_string(r) + ".log";
    std::string log = readFile(path);
    if (getenv("ACCL_TEST_SHOW_LOGS")) printf("--- rank %d log ---\n%s", r, log.c_str());
    unlink(path.c_str());
    bool shouldFail = !p2p || r == 1;  // of a send/recv pair, only the receiver can tell
    EXPECT_EQ(sh->mismatched[r], shouldFail ? ncclInvalidUsage : ncclSuccess) << "rank " << r << "\n" << log;
    if (shouldFail) {
      EXPECT_NE(log.find(c.expectedLog), std::string::npos) << "rank " << r << "'s log:\n" << log;
    }
    EXPECT_TRUE(sh->nextSmall[r]) << "rank " << r << ": the next 4-float all-reduce was wrong\n" << log;
    EXPECT_TRUE(sh->nextLarge[r]) << "rank " << r << ": the next 1M-float all-reduce was wrong\n" << log;
  }
  munmap(sh, sizeof(Shared));
}

const char* kCountMsg = "rank 0 called AllReduce(1000 x float32, sum) but rank 1 called AllReduce(2000 x float32, sum)";
const char* kRootMsg = "rank 0 called Broadcast(1000 x float32, root 0) but rank 1 called Broadcast(1000 x float32, root 1)";
const char* kKindMsg = "rank 0 called AllReduce(1000 x float32, sum) but rank 1 called Broadcast(1000 x float32, root 0)";
const char* kRecvMsg = "receive from rank 0 was posted for 4000 bytes but rank 0 sent 8000 bytes";

std::string caseName(const testing::TestParamInfo<Case>& info) {
  const char* names[] = {"AllReduceCount", "BroadcastRoot", "AllReduceVsBroadcast", "RecvShorterThanSend"};
  return std::string(names[static_cast<int>(info.param.kind)]) + (info.param.sockets ? "Sockets" : "Shm");
}

INSTANTIATE_TEST_SUITE_P(Calls, Mismatch,
                         testing::Values(Case{Kind::AllReduceCount, false, kCountMsg},
                                         Case{Kind::AllReduceCount, true, kCountMsg},
                                         Case{Kind::BroadcastRoot, false, kRootMsg},
                                         Case{Kind::BroadcastRoot, true, kRootMsg},
                                         Case{Kind::AllReduceVsBroadcast, false, kKindMsg},
                                         Case{Kind::AllReduceVsBroadcast, true, kKindMsg},
                                         Case{Kind::RecvShorterThanSend, false, kRecvMsg},
                                         Case{Kind::RecvShorterThanSend, true, kRecvMsg}),
                         caseName);

// Two ranks that both block with ACCL_CHECK_MISMATCH=0, with ACCL_TIMEOUT=2; returns both
// ranks' logs. `call` runs on each rank and must end in ncclRemoteError (the timeout). With the
// default checks the ranks would find the waiting cycle instead (wait_cycle_mp_test.cc).
std::string hangTwoRanks(ncclResult_t (*call)(int rank, ncclComm_t comm)) {
  std::string base = testing::TempDir() + "accl_mismatch_hang_" + std::to_string(getpid());
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<pid_t> pids;
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < 2; r++) {
    pid_t pid = fork();
    EXPECT_GE(pid, 0);
    if (pid == 0) {
      alarm(30);
      setenv("NCCL_DEBUG", "WARN", 1);
      setenv("NCCL_DEBUG_FILE", (base + "." + std::to_string(r) + ".log").c_str(), 1);
      setenv("ACCL_TIMEOUT", "2", 1);
      setenv("ACCL_CHECK_MISMATCH", "0", 1);
      ncclResetDebugInit();
      ncclComm_t comm;
      if (ncclCommInitRank(&comm, 2, id, r) != ncclSuccess) _exit(10);
      ncclResult_t res = call(r, comm);
      ncclCommAbort(comm);
      _exit(res == ncclRemoteError ? 0 : 12);
    }
    pids.push_back(pid);
  }
  std::string logs;
  for (int r = 0; r < 2; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " status " << status;
    std::string path = base + "." + std::to_string(r) + ".log";
    logs += readFile(path);
    unlink(path.c_str());
  }
  if (getenv("ACCL_TEST_SHOW_LOGS")) printf("%s", logs.c_str());
  return logs;
}

// Reduce to root 0 on rank 0, to root 1 on rank 1: each waits for the other's data. The hang
// summary must name the disagreement instead of saying "none".
TEST(MismatchHang, TheHangSummaryNamesRanksInDifferentOperations) {
  std::string logs = hangTwoRanks([](int r, ncclComm_t comm) {
    std::vector<float> buf(1000, 1.0f);
    return ncclReduce(buf.data(), buf.data(), 1000, ncclFloat, ncclSum, r, comm, nullptr);
  });
  EXPECT_NE(logs.find("in different operations (mismatched calls?): rank 0 in Reduce(1000 x float32, sum, root 0), "
                      "rank 1 in Reduce(1000 x float32, sum, root 1)"),
            std::string::npos)
      << logs;
}

// Both ranks receive from each other and nobody sends: a hang, but sends and receives differ
// between ranks by nature, so the summary must not call them mismatched.
TEST(MismatchHang, ReceivesThatDifferByPeerAreNotCalledMismatched) {
  std::string logs = hangTwoRanks([](int r, ncclComm_t comm) {
    std::vector<float> buf(1000, 1.0f);
    return ncclRecv(buf.data(), 1000, ncclFloat, 1 - r, comm, nullptr);
  });
  EXPECT_NE(logs.find("ACCL hang summary"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("in different operations"), std::string::npos) << logs;
}

}  // namespace
