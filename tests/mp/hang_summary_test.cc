// A rank that stops calling the collective: with ACCL_TIMEOUT the others fail with
// ncclRemoteError, and the hang summary (gathered from every rank's status server) names the
// rank that is behind.
#include <cstdlib>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "nccl.h"
#include "common/text_file.h"

namespace {

using accl_test::readFile;

TEST(HangSummary, ARankThatSkipsTheCollectiveIsNamedAsBehindAndTheOthersTimeOut) {
  const int n = 4, laggard = 2;
  std::string logBase = testing::TempDir() + "accl_hang_" + std::to_string(getpid());
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; r++) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("ACCL_TIMEOUT", "2", 1);
      setenv("NCCL_DEBUG", "WARN", 1);
      setenv("NCCL_DEBUG_FILE", (logBase + ".%p.log").c_str(), 1);
      ncclResetDebugInit();  // the parent already initialised logging before the fork
      ncclComm_t comm;
      if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) _exit(10);
      std::vector<float> a(1 << 14, 1.0f), b(1 << 14);
      if (ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) _exit(11);
      if (r == laggard) {
        sleep(5);  // never joins the second all-reduce
        _exit(0);
      }
      ncclResult_t res = ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat, ncclSum, comm, nullptr);
      _exit(res == ncclRemoteError ? 0 : 12);
    }
    pids.push_back(pid);
  }
  for (int r = 0; r < n; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " status " << status;
  }
  std::string logs;
  for (pid_t p : pids) {
    std::string path = logBase + "." + std::to_string(p) + ".log";
    logs += readFile(path);
    unlink(path.c_str());
  }
  EXPECT_NE(logs.find("ACCL hang summary"), std::string::npos) << logs;
  EXPECT_NE(logs.find("rank 2: 1 of 1 ops done, idle"), std::string::npos) << logs;
  EXPECT_NE(logs.find("=> behind (not in this op): rank 2; gone: none"), std::string::npos) << logs;
  EXPECT_NE(logs.find("ACCL_TIMEOUT=2 s expired"), std::string::npos) << logs;
  EXPECT_NE(logs.find("waiting for data from rank"), std::string::npos) << logs;
}

}  // namespace
