// Shared memory at scale and after a kill. Each job runs in its own mount namespace with a
// fresh tmpfs on /dev/shm, so what the job leaves or uses there is measured exactly, whatever
// other jobs on the machine do (needs root; otherwise the test is skipped, saying why).
//  - ManyRanksOnOneHost: 64 process ranks, one 8-byte all-reduce (NULL stream). Init time and
//    shared memory stay bounded: shm rings are made for the peers the algorithms use, when
//    first used (issue 9 item 5: before, 64 ranks took 4.2 GB of /dev/shm and 6.6-9.3 s).
//  - SigtermMidSetupLeavesNothing: ranks ended with SIGTERM while they set up (init, then a
//    split) leave no segment behind (issue 9 item 6).
#include <gtest/gtest.h>
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mp/forked_ranks.h"
#include "nccl.h"

namespace {

constexpr int kMaxRanks = 256;

using accl_forked::mapShared;
using accl_forked::nowNs;

struct Shared {
  accl_forked::SharedId uid;
  std::atomic<int> arrived;
  std::atomic<int> measured;
  int64_t initStartNs[kMaxRanks];
  int64_t initEndNs[kMaxRanks];
  int64_t memfdBytes[kMaxRanks];  // resident bytes of the shared segments this rank created
  int result[kMaxRanks];
  float value[kMaxRanks];
  int64_t devShmUsedBytes;  // /dev/shm (private tmpfs) in use while every rank is initialised
  int64_t devShmEntries;
  int setupError;           // 0: the private /dev/shm is in place; else why not (errno)
  int64_t leftEntries;      // entries in /dev/shm after the killed job
};

// Bytes of the shared memory segments (memfds) this process holds open.
int64_t memfdResidentBytes() {
  int64_t total = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    std::string fdPath = std::string("/proc/self/fd/") + e->d_name;
    char target[256] = {};
    if (readlink(fdPath.c_str(), target, sizeof(target) - 1) <= 0) continue;
    if (std::strstr(target, "memfd:accl") == nullptr) continue;
    struct stat st{};
    if (stat(fdPath.c_str(), &st) == 0) total += int64_t(st.st_blocks) * 512;
  }
  closedir(d);
  return total;
}

int64_t countEntries(const char* dir) {
  int64_t n = 0;
  DIR* d = opendir(dir);
  if (!d) return -1;
  while (dirent* e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

int64_t usedBytes(const char* dir) {
  struct statvfs vs{};
  if (statvfs(dir, &vs) != 0) return -1;
  return int64_t(vs.f_blocks - vs.f_bfree) * int64_t(vs.f_frsize);
}

// A private /dev/shm for this process and its children. Returns 0 or errno.
int privateDevShm() {
  if (unshare(CLONE_NEWNS) != 0) return errno;
  if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  if (mount("accl-test-shm", "/dev/shm", "tmpfs", 0, "size=8g") != 0) return errno;
  return 0;
}

void waitAll(std::atomic<int>& counter, int n) {
  counter.fetch_add(1);
  while (counter.load() < n) usleep(1000);
}

[[noreturn]] void manyRanksRank(Shared* sh, int rank, int nranks) {
  alarm(120);  // a rank that hangs dies instead of hanging the test (and the test fails)
  accl_forked::exchangeId(&sh->uid, rank);
  ncclComm_t comm;
  sh->initStartNs[rank] = nowNs();
  if (ncclCommInitRank(&comm, nranks, sh->uid.id, rank) != ncclSuccess) _exit(12);
  sh->initEndNs[rank] = nowNs();
  float buf[2] = {float(rank), 1.0f};
  sh->result[rank] = ncclAllReduce(buf, buf, 2, ncclFloat, ncclSum, comm, nullptr);
  sh->value[rank] = buf[0];
  sh->memfdBytes[rank] = memfdResidentBytes();
  waitAll(sh->arrived, nranks);
  if (rank == 0) {
    sh->devShmUsedBytes = usedBytes("/dev/shm");
    sh->devShmEntries = countEntries("/dev/shm");
    sh->measured.store(1);
  }
  while (sh->measured.load() == 0) usleep(1000);
  ncclCommDestroy(comm);
  _exit(0);
}

// Runs `job` in a child with a private /dev/shm; returns the child's exit status.
template <typename Job>
int inPrivateShmNamespace(Shared* sh, Job job) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    sh->setupError = privateDevShm();
    if (sh->setupError != 0) _exit(77);
    _exit(job());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

int runManyRanks(Shared* sh, int nranks) {
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; r++) {
    pid_t pid = fork();
    if (pid < 0) return 20;
    if (pid == 0) manyRanksRank(sh, r, nranks);
    pids.push_back(pid);
  }
  int bad = 0;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad++;
  }
  return bad == 0 ? 0 : 21;
}

TEST(ShmScaling, ManyRanksOnOneHostInitFastAndUseLittleSharedMemory) {
  const int nranks = getenv("ACCL_TEST_MANY_RANKS") ? atoi(getenv("ACCL_TEST_MANY_RANKS")) : 64;
  ASSERT_LE(nranks, kMaxRanks);
  Shared* sh = mapShared<Shared>();
  ASSERT_NE(sh, nullptr);
  int status = inPrivateShmNamespace(sh, [&] { return runManyRanks(sh, nranks); });
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
    GTEST_SKIP() << "cannot mount a private /dev/shm (needs root): " << strerror(sh->setupError);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a rank failed or hung (status " << status << ")";
  int64_t first = sh->initStartNs[0], last = sh->initEndNs[0], memfd = 0;
  for (int r = 0; r < nranks; r++) {
    first = std::min(first, sh->initStartNs[r]);
    last = std::max(last, sh->initEndNs[r]);
    memfd += sh->memfdBytes[r];
    EXPECT_EQ(sh->result[r], ncclSuccess) << "rank " << r;
    EXPECT_EQ(sh->value[r], float(nranks * (nranks - 1) / 2)) << "rank " << r;
  }
  double initSec = (last - first) / 1e9;
  int64_t total = memfd + sh->devShmUsedBytes;
  printf("%d ranks: init %.2f s (first start to last finish); shared memory %.1f MB "
         "(segments %.1f MB + /dev/shm %.1f MB in %lld entries)\n",
         nranks, initSec, total / 1e6, memfd / 1e6, sh->devShmUsedBytes / 1e6,
         static_cast<long long>(sh->devShmEntries));
  EXPECT_LT(total, 300ll << 20);
  // The goal is < 2 s on an idle machine; the slack is for 2 loaded cores shared with other tests.
  EXPECT_LT(initSec, 10.0);
  munmap(sh, sizeof(Shared));
}

// Ranks that set up a communicator and then a split, ended with SIGTERM at spread-out
// moments of that setup: nothing may be left in /dev/shm.
TEST(ShmScaling, SigtermMidSetupLeavesNothingInDevShm) {
  constexpr int kRanks = 6;
  Shared* sh = mapShared<Shared>();
  ASSERT_NE(sh, nullptr);
  int status = inPrivateShmNamespace(sh, [&] {
    for (int attempt = 0; attempt < 6; attempt++) {
      sh->uid.ready.store(0);
      std::vector<pid_t> pids;
      for (int r = 0; r < kRanks; r++) {
        pid_t pid = fork();
        if (pid == 0) {
          alarm(60);
          ncclComm_t comm = accl_forked::initForkedRank(&sh->uid, kRanks, r);
          ncclComm_t sub;
          float x = 1;
          ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, nullptr);
          // The last rank never joins the split: the others wait inside its setup.
          if (r == kRanks - 1) pause();
          ncclCommSplit(comm, r % 2, r, &sub, nullptr);
          pause();
        }
        pids.push_back(pid);
      }
      usleep(40000 * attempt + 20000);  // 20 ms .. 220 ms: from early init to inside the split
      for (pid_t p : pids) kill(p, SIGTERM);
      for (pid_t p : pids) waitpid(p, nullptr, 0);
    }
    sh->leftEntries = countEntries("/dev/shm");
    return 0;
  });
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
    GTEST_SKIP() << "cannot mount a private /dev/shm (needs root): " << strerror(sh->setupError);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ(sh->leftEntries, 0) << "entries left in /dev/shm by ranks ended with SIGTERM";
  munmap(sh, sizeof(Shared));
}

}  // namespace
