// Mismatched calls that nobody's data reveals (issue 43 items 2 and 3), with no setting
// (ACCL_CHECK_MISMATCH=1, the default): every rank waits for another and nobody sends, so no
// call stamp travels. The ranks must find the waiting cycle within about a second, fail the
// call on every rank with ncclInvalidUsage and a message naming the calls, and stay usable:
// the matched 1 MiB all-reduces right after are exact. And a receive that meets the sender's
// next collective (all-gather against receive) must leave every rank at the same call number,
// so the all-reduces that follow pair up. Over shared memory and sockets.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/text_file.h"
#include "mp/forked_ranks.h"
#include "nccl.h"

namespace {

constexpr int kMaxRanks = 3;
constexpr size_t kFloats = 1 << 18;  // 1 MiB of float32

enum class Kind {
  BroadcastOtherRoot,  // rank r broadcasts from root (r + 1) % n: everyone waits for another root
  RecvVsRecv,          // two ranks each receive from the other
  BroadcastVsRecv,     // rank 0: Broadcast(root 1); rank 1: Recv(from 0)
  AllGatherVsRecv      // rank 0: AllGather; rank 1: Recv(from 0) (item 2: realignment off by one)
};

struct Shared {
  accl_forked::SharedId uid;
  int mismatched[kMaxRanks];   // result of the mismatched call
  int64_t failedAfterNs[kMaxRanks];  // how long the mismatched call took
  int nextExact[kMaxRanks];    // 1: both matched 1 MiB all-reduces after it were exact
};

ncclResult_t mismatchedCall(Kind kind, int rank, int nranks, ncclComm_t comm) {
  std::vector<float> buf(kFloats * kMaxRanks, 1.0f);
  switch (kind) {
    case Kind::BroadcastOtherRoot:
      return ncclBroadcast(buf.data(), buf.data(), 1000, ncclFloat, (rank + 1) % nranks, comm, nullptr);
    case Kind::RecvVsRecv:
      return ncclRecv(buf.data(), 1000, ncclFloat, 1 - rank, comm, nullptr);
    case Kind::BroadcastVsRecv:
      return rank == 0 ? ncclBroadcast(buf.data(), buf.data(), 1000, ncclFloat, 1, comm, nullptr)
                       : ncclRecv(buf.data(), 1000, ncclFloat, 0, comm, nullptr);
    case Kind::AllGatherVsRecv:
      return rank == 0 ? ncclAllGather(buf.data(), buf.data(), 1000, ncclFloat, comm, nullptr)
                       : ncclRecv(buf.data(), 1000, ncclFloat, 0, comm, nullptr);
  }
  return ncclInternalError;
}

// A matched 1 MiB all-reduce, checked element by element against the sum computed here.
bool exactAllReduce(ncclComm_t comm, int rank, int nranks, int round) {
  std::vector<float> buf(kFloats);
  for (size_t i = 0; i < kFloats; i++) buf[i] = static_cast<float>((rank + 1) * (i % 7 + 1) + round);
  if (ncclAllReduce(buf.data(), buf.data(), kFloats, ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) return false;
  const int rankSum = nranks * (nranks + 1) / 2;
  for (size_t i = 0; i < kFloats; i++)
    if (buf[i] != static_cast<float>(rankSum * (i % 7 + 1) + nranks * round)) return false;
  return true;
}

[[noreturn]] void rankMain(Shared* sh, int rank, int nranks, Kind kind, bool sockets, const std::string& logPath) {
  alarm(30);  // a hang kills the rank with SIGALRM (and fails the test)
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", logPath.c_str(), 1);
  unsetenv("ACCL_CHECK_MISMATCH");  // the default: no setting
  unsetenv("ACCL_TIMEOUT");
  if (sockets) setenv("NCCL_SHM_DISABLE", "1", 1);
  ncclResetDebugInit();
  ncclComm_t comm = accl_forked::initForkedRank(&sh->uid, nranks, rank);
  const int64_t t0 = accl_forked::nowNs();
  sh->mismatched[rank] = mismatchedCall(kind, rank, nranks, comm);
  sh->failedAfterNs[rank] = accl_forked::nowNs() - t0;
  sh->nextExact[rank] = exactAllReduce(comm, rank, nranks, 1) && exactAllReduce(comm, rank, nranks, 2);
  ncclCommDestroy(comm);
  _exit(0);
}

struct Case {
  Kind kind;
  int nranks;
  bool sockets;
  std::vector<const char*> expectedLog;  // what every rank's log must contain
};

class WaitCycle : public testing::TestWithParam<Case> {};

TEST_P(WaitCycle, EveryRankFailsNamingTheCallsAndTheNextMatchedCallsAreExact) {
  const Case& c = GetParam();
  auto* sh = accl_forked::mapShared<Shared>();
  ASSERT_NE(sh, nullptr);
  std::string base = testing::TempDir() + "accl_wait_cycle_" + std::to_string(getpid());
  std::vector<pid_t> pids;
  ASSERT_NO_FATAL_FAILURE(accl_forked::forkRanks(
      c.nranks,
      [&](int r) { rankMain(sh, r, c.nranks, c.kind, c.sockets, base + "." + std::to_string(r) + ".log"); }, &pids));
  for (int r = 0; r < c.nranks; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << r << " status " << status << " (SIGALRM = it hung)";
  }
  for (int r = 0; r < c.nranks; r++) {
    std::string path = base + "." + std::to_string(r) + ".log";
    std::string log = accl_test::readFile(path);
    if (getenv("ACCL_TEST_SHOW_LOGS")) printf("--- rank %d log ---\n%s", r, log.c_str());
    unlink(path.c_str());
    EXPECT_EQ(sh->mismatched[r], ncclInvalidUsage) << "rank " << r << "\n" << log;
    for (const char* words : c.expectedLog)
      EXPECT_NE(log.find(words), std::string::npos) << "rank " << r << " lacks '" << words << "':\n" << log;
    EXPECT_LT(sh->failedAfterNs[r], 5'000'000'000) << "rank " << r << ": the cycle took too long to find";
    EXPECT_TRUE(sh->nextExact[r]) << "rank " << r << ": a matched 1 MiB all-reduce after it was wrong\n" << log;
  }
  munmap(sh, sizeof(Shared));
}

const std::vector<const char*> kCycle = {"mismatched calls", "a waiting cycle", "no rank has data to send"};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (bool sockets : {false, true}) {
    auto add = [&](Kind kind, int nranks, std::vector<const char*> log) {
      out.push_back(Case{kind, nranks, sockets, std::move(log)});
    };
    std::vector<const char*> bcast2 = kCycle;
    bcast2.push_back("rank 0 waits in Broadcast(1000 x float32, root 1)");
    bcast2.push_back("rank 1 waits in Broadcast(1000 x float32, root 0)");
    add(Kind::BroadcastOtherRoot, 2, bcast2);
    std::vector<const char*> bcast3 = kCycle;
    bcast3.push_back("rank 2 waits in Broadcast(1000 x float32, root 0)");
    add(Kind::BroadcastOtherRoot, 3, bcast3);
    std::vector<const char*> recv = kCycle;
    recv.push_back("rank 0 waits in Recv(from rank 1");
    recv.push_back("rank 1 waits in Recv(from rank 0");
    add(Kind::RecvVsRecv, 2, recv);
    std::vector<const char*> bvr = kCycle;
    bvr.push_back("rank 0 waits in Broadcast(1000 x float32, root 1)");
    bvr.push_back("rank 1 waits in Recv(from rank 0");
    add(Kind::BroadcastVsRecv, 2, bvr);
    // The receive finds the all-gather's stamp (in the stream over sockets, on the board over
    // shared memory): the ranks ran their calls in a different order.
    add(Kind::AllGatherVsRecv, 2, {"mismatched calls", "AllGather(1000 x float32)", "in a different order"});
  }
  return out;
}

std::string caseName(const testing::TestParamInfo<Case>& info) {
  static const char* kinds[] = {"BroadcastOtherRoot", "RecvVsRecv", "BroadcastVsRecv", "AllGatherVsRecv"};
  std::string name = kinds[static_cast<int>(info.param.kind)];
  if (info.param.kind == Kind::BroadcastOtherRoot) name += "Np" + std::to_string(info.param.nranks);
  return name + (info.param.sockets ? "Sockets" : "Shm");
}

INSTANTIATE_TEST_SUITE_P(Calls, WaitCycle, testing::ValuesIn(cases()), caseName);

}  // namespace
