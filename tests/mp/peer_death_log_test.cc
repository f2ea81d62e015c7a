// SIGKILL one of four rank processes in the middle of a long series of all-reduces (NULL
// stream): every survivor's ncclAllReduce returns ncclRemoteError or ncclSystemError within
// 10 s, ncclCommGetAsyncError then reports it, and the survivor's NCCL_DEBUG=WARN log names
// the lost rank. Over shared memory and over sockets (NCCL_SHM_DISABLE=1), and over sockets with
// NCCL_ALGO=AllPairs (every rank waits for every peer's input, in rank order), also with 8-float
// all-reduces, which AllPairs runs straight from the call (sched/pairs_fast_path.h), and over
// sockets with large all-gathers instead (their sends go from the user's buffer straight to
// send(): a peer dying mid-send must fail the survivors, not leave them waiting on a half-sent span).
// Each survivor's log is its NCCL_DEBUG_FILE.
// (tests/mp/failure_shrink_test.cc covers recovery by ncclCommShrink; this file covers what a
// user sees: result codes and the log.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "mp/forked_ranks.h"
#include "nccl.h"

namespace {

constexpr int kRanks = 4;
constexpr int kVictim = 3;
constexpr int kItersBeforeKill = 20;
constexpr int64_t kDetectLimitNs = 10'000'000'000;

using accl_forked::mapShared;
using accl_forked::nowNs;

// Shared by the parent and the forked ranks (MAP_SHARED, lock-free atomics only).
struct Shared {
  accl_forked::SharedId uid;
  std::atomic<int> iterations[kRanks];
  std::atomic<int> done[kRanks];
  int failedResult[kRanks];
  int asyncError[kRanks];
  int64_t failedAtNs[kRanks];
  std::atomic<int64_t> killedAtNs;
};

// Body of one rank process; never returns.
// How the ranks talk: transport, and the all-reduce algorithm forced (nullptr: the tuner's).
struct Variant {
  bool sockets;
  const char* algo;
  size_t count = 1 << 16;  // floats per all-reduce
  bool largeAllGathers = false;  // 4 MiB per rank instead of all-reduces
};

[[noreturn]] void rankMain(Shared* sh, int rank, const Variant& v, const std::string& logPath) {
  alarm(60);  // last-resort guard: a hung rank dies instead of hanging the test
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", logPath.c_str(), 1);
  if (v.sockets) setenv("NCCL_SHM_DISABLE", "1", 1);
  if (v.algo) setenv("NCCL_ALGO", v.algo, 1);
  ncclComm_t comm = accl_forked::initForkedRank(&sh->uid, kRanks, rank);
  std::vector<float> buf(v.largeAllGathers ? 1 << 20 : v.count, 1.0f);
  std::vector<float> gathered(v.largeAllGathers ? kRanks << 20 : 0);
  for (;;) {
    ncclResult_t r = v.largeAllGathers
                         ? ncclAllGather(buf.data(), gathered.data(), buf.size(), ncclFloat, comm, nullptr)
                         : ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclAvg, comm, nullptr);
    if (r != ncclSuccess) {
      sh->failedAtNs[rank] = nowNs();
      sh->failedResult[rank] = r;
      ncclResult_t async = ncclSuccess;
      sh->asyncError[rank] = ncclCommGetAsyncError(comm, &async) == ncclSuccess ? async : -1;
      ncclCommAbort(comm);
      sh->done[rank].store(1);
      _exit(0);
    }
    sh->iterations[rank].fetch_add(1);
  }
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Outcome {
  bool allRunning = false;
  bool victimKilled = false;
  bool reaped[kRanks] = {};
  int status[kRanks] = {};
  std::string log[kRanks];
  Shared sh;  // a copy of the shared record, taken after every rank ended
};

// Forks kRanks rank processes, SIGKILLs kVictim after every rank did kItersBeforeKill
// all-reduces, and collects what the survivors recorded and logged.
void runScenario(const Variant& v, Outcome* out) {
  auto* sh = mapShared<Shared>();
  ASSERT_NE(sh, nullptr);
  char dirTemplate[] = "/tmp/accl_peer_death_XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  auto logOf = [&](int r) { return dir + "/rank" + std::to_string(r) + ".log"; };

  std::vector<pid_t> pids;
  ASSERT_NO_FATAL_FAILURE(accl_forked::forkRanks(kRanks, [&](int r) { rankMain(sh, r, v, logOf(r)); }, &pids));
  const int64_t startNs = nowNs();
  while (!out->allRunning && nowNs() - startNs < 30'000'000'000) {
    out->allRunning = true;
    for (int r = 0; r < kRanks; r++) out->allRunning = out->allRunning && sh->iterations[r].load() >= kItersBeforeKill;
    if (!out->allRunning) usleep(1000);
  }
  sh->killedAtNs.store(nowNs());
  kill(pids[kVictim], SIGKILL);
  // Survivors must finish well within the limit; anything left after 20 s is killed.
  const int64_t reapBy = nowNs() + 20'000'000'000;
  for (int left = kRanks; left > 0 && nowNs() < reapBy;) {
    for (int r = 0; r < kRanks; r++) {
      if (!out->reaped[r] && waitpid(pids[r], &out->status[r], WNOHANG) == pids[r]) {
        out->reaped[r] = true;
        left--;
      }
    }
    usleep(2000);
  }
  for (int r = 0; r < kRanks; r++) {
    if (!out->reaped[r]) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], &out->status[r], 0);
    }
  }
  out->victimKilled = WIFSIGNALED(out->status[kVictim]) && WTERMSIG(out->status[kVictim]) == SIGKILL;
  for (int r = 0; r < kRanks; r++) {
    out->log[r] = readFile(logOf(r));
    std::remove(logOf(r).c_str());
  }
  rmdir(dir.c_str());
  std::memcpy(static_cast<void*>(&out->sh), sh, sizeof(Shared));
  munmap(sh, sizeof(Shared));
}

const std::string kLost = "rank " + std::to_string(kVictim);

class KillOneRankProcess : public testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    runScenario(GetParam(), &out_);
    ASSERT_TRUE(out_.allRunning) << "the ranks never reached " << kItersBeforeKill << " all-reduces";
    ASSERT_TRUE(out_.victimKilled);
  }
  Outcome out_;
};

TEST_P(KillOneRankProcess, EverySurvivorsAllReduceReturnsRemoteOrSystemErrorWithinTenSeconds) {
  for (int r = 0; r < kRanks; r++) {
    if (r == kVictim) continue;
    SCOPED_TRACE("survivor rank " + std::to_string(r));
    const Shared& sh = out_.sh;
    ASSERT_TRUE(out_.reaped[r] && sh.done[r].load()) << "still blocked 20 s after the kill; log:\n" << out_.log[r];
    EXPECT_TRUE(WIFEXITED(out_.status[r]) && WEXITSTATUS(out_.status[r]) == 0);
    EXPECT_TRUE(sh.failedResult[r] == ncclRemoteError || sh.failedResult[r] == ncclSystemError)
        << "ncclAllReduce returned " << sh.failedResult[r];
    EXPECT_TRUE(sh.asyncError[r] == ncclRemoteError || sh.asyncError[r] == ncclSystemError)
        << "ncclCommGetAsyncError reported " << sh.asyncError[r];
    const int64_t detectNs = sh.failedAtNs[r] - sh.killedAtNs.load();
    EXPECT_LT(detectNs, kDetectLimitNs) << "error surfaced " << detectNs / 1e6 << " ms after the kill";
    std::printf("[ info     ] rank %d: %s after %.0f ms, %d all-reduces done\n", r,
                ncclGetErrorString(static_cast<ncclResult_t>(sh.failedResult[r])), detectNs / 1e6,
                sh.iterations[r].load());
  }
}

TEST_P(KillOneRankProcess, TheLogOfARankThatTalkedToTheDeadRankNamesIt) {
  int naming = 0;
  for (int r = 0; r < kRanks; r++)
    if (r != kVictim && out_.log[r].find(kLost) != std::string::npos) naming++;
  EXPECT_GE(naming, 1) << "no survivor's WARN log names " << kLost << "; rank 0's log:\n" << out_.log[0];
}

// Ranks that do not exchange data with the dead rank learn of the failure from a neighbour
// closing its connections; their log must still say which rank was lost.
TEST_P(KillOneRankProcess, EverySurvivorsLogNamesTheLostRank) {
  for (int r = 0; r < kRanks; r++) {
    if (r == kVictim) continue;
    EXPECT_NE(out_.log[r].find(kLost), std::string::npos)
        << "survivor rank " << r << "'s WARN log does not name " << kLost << ":\n" << out_.log[r];
  }
}

INSTANTIATE_TEST_SUITE_P(, KillOneRankProcess,
                         testing::Values(Variant{false, nullptr}, Variant{true, nullptr}, Variant{true, "AllPairs"},
                                         Variant{true, "AllPairs", 8}, Variant{true, nullptr, 1 << 16, true}),
                         [](const testing::TestParamInfo<Variant>& info) {
                           return std::string(info.param.sockets ? "OverSockets" : "OverSharedMemory") +
                                  (info.param.algo ? std::string("With") + info.param.algo : std::string()) +
                                  (info.param.count < 1024 ? "Small" : "") +
                                  (info.param.largeAllGathers ? "LargeAllGathers" : "");
                         });

}  // namespace
