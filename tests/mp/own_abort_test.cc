// The rank that calls ncclCommAbort while another of its threads is inside ncclGroupEnd: that
// call fails, and what it logs (and ncclGetLastError) says this rank aborted it; it does not
// blame a peer ("lost peer rank 0") for the connections its own abort closed (issue 27).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/text_file.h"
#include "mp/forked_ranks.h"
#include "nccl.h"

namespace {

struct Shared {
  accl_forked::SharedId uid;
  int aborted;  // set by rank 1 once its ncclCommAbort returned
  int result[2];
  char lastError[2][512];
};

class OwnAbort : public testing::TestWithParam<const char*> {};

TEST_P(OwnAbort, TheAbortingRanksGroupEndBlamesItsOwnAbortNotAPeer) {
  auto* sh = accl_forked::mapShared<Shared>();
  ASSERT_NE(sh, nullptr);
  const std::string base = testing::TempDir() + "accl_own_abort_" + std::to_string(getpid());
  const bool sockets = std::string(GetParam()) == "Sockets";
  std::vector<pid_t> pids;
  ASSERT_NO_FATAL_FAILURE(accl_forked::forkRanks(
      2,
      [&](int rank) {
        alarm(60);
        setenv("NCCL_DEBUG", "WARN", 1);
        setenv("NCCL_DEBUG_FILE", (base + "." + std::to_string(rank) + ".log").c_str(), 1);
        if (sockets) setenv("NCCL_SHM_DISABLE", "1", 1);
        ncclComm_t comm = accl_forked::initForkedRank(&sh->uid, 2, rank);
        if (rank == 0) {
          // Rank 0 stays out of the group until rank 1 has aborted, so rank 1's group can only
          // end through its own abort (it once finished within the 30 ms on an idle machine).
          while (__atomic_load_n(&sh->aborted, __ATOMIC_ACQUIRE) == 0) usleep(1000);
          ncclCommAbort(comm);
          _exit(0);
        }
        std::vector<float> buf(16 << 20, 1.0f);
        std::thread aborter([comm, sh] {
          usleep(30 * 1000);
          ncclCommAbort(comm);
          __atomic_store_n(&sh->aborted, 1, __ATOMIC_RELEASE);
        });
        ncclGroupStart();
        ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr);
        ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr);
        sh->result[rank] = ncclGroupEnd();
        snprintf(sh->lastError[rank], sizeof(sh->lastError[rank]), "%s", ncclGetLastError(nullptr));
        aborter.join();
        _exit(0);
      },
      &pids));
  for (int r = 0; r < 2; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " status " << status;
  }
  std::string logs[2];
  for (int r = 0; r < 2; r++) {
    const std::string path = base + "." + std::to_string(r) + ".log";
    logs[r] = accl_test::readFile(path);
    unlink(path.c_str());
  }
  EXPECT_NE(sh->result[1], ncclSuccess) << "the aborted group finished anyway?\n" << logs[1];
  EXPECT_EQ(logs[1].find("lost peer"), std::string::npos) << logs[1];
  EXPECT_NE(logs[1].find("ncclCommAbort"), std::string::npos) << logs[1];
  const std::string last = sh->lastError[1];
  EXPECT_EQ(last.find("lost peer"), std::string::npos) << last;
  EXPECT_NE(last.find("ncclCommAbort"), std::string::npos) << last;
  if (getenv("ACCL_TEST_SHOW_LOGS")) printf("--- rank 0\n%s--- rank 1\n%s", logs[0].c_str(), logs[1].c_str());
  munmap(sh, sizeof(Shared));
}

INSTANTIATE_TEST_SUITE_P(Paths, OwnAbort, testing::Values("Shm", "Sockets"),
                         [](const testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
