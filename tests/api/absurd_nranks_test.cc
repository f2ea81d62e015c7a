// Init with an nranks the host could never hold is refused at once with ncclInvalidArgument,
// before any large allocation; a plausible but large nranks costs memory only for the ranks
// that have actually joined (issue #43, item 5).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#include "api/thread_ranks_util.h"
#include "nccl.h"

using accltest::lastError;

namespace {

// The process's peak resident memory (VmHWM), in KiB.
long peakResidentKiB() {
  std::ifstream in("/proc/self/status");
  std::string key;
  long value = -1;
  while (in >> key) {
    if (key == "VmHWM:") {
      in >> value;
      break;
    }
    in.ignore(1 << 20, '\n');
  }
  return value;
}

int64_t physicalBytes() { return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE); }

void expectRefused(int nranks) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  long before = peakResidentKiB();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommInitRank(&comm, nranks, id, 0), ncclInvalidArgument) << "nranks " << nranks;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "nranks " << nranks;
  EXPECT_EQ(comm, nullptr);
  std::string err = lastError();
  EXPECT_NE(err.find("nranks = " + std::to_string(nranks)), std::string::npos) << err;
  EXPECT_NE(err.find("more than this host could hold"), std::string::npos) << err;
  EXPECT_LT(peakResidentKiB() - before, 64 * 1024) << "nranks " << nranks << " allocated before refusing";
}

}  // namespace

TEST(AbsurdNranks, IntMaxIsRefusedBeforeAnyLargeAllocation) { expectRefused(INT_MAX); }

TEST(AbsurdNranks, TwoToTheThirtyIsRefusedWhereItCannotFit) {
  // The bound is 256 B of state per rank in physical memory.
  if (physicalBytes() / 256 >= (int64_t{1} << 30)) {
    GTEST_SKIP() << "this host has " << (physicalBytes() >> 30) << " GiB: 2^30 ranks would fit the bound";
  }
  expectRefused(1 << 30);
}

// 2^24 ranks may be plausible here; rank 0 alone joins, and the root must not allocate per-rank
// state for the 2^24 - 1 ranks that never arrive (it used to take 2.9 GB at once).
TEST(AbsurdNranks, MemoryGrowsOnlyWithTheRanksThatJoined) {
  constexpr int kRanks = 1 << 24;
  if (physicalBytes() / 256 < kRanks) GTEST_SKIP() << "2^24 ranks exceed this host's bound: refused at once";
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = nullptr;
  long before = peakResidentKiB();
  ncclResult_t r = ncclCommInitRankConfig(&comm, kRanks, id, 0, &cfg);
  ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << lastError();
  ASSERT_NE(comm, nullptr);
  // Long enough for rank 0's hello to reach the root and be checked, even on a loaded machine.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ncclResult_t state = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclInProgress) << "init of 2^24 ranks cannot finish with one rank";
  EXPECT_LT(peakResidentKiB() - before, 256 * 1024) << "init allocated for ranks that never joined";
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
}
