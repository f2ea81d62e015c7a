// Mismatched calls through the IB net module (issue 27, every path): two thread ranks with
// shared memory off and NCCL_NET=IB on the fake fabric (tests/unit/ib_fake_verbs.h), nothing
// else set, so the default call stamps ride in the bytes the module carries. An all-reduce of
// 256 elements on rank 0 and 512 on rank 1 fails with ncclInvalidUsage, a WARN names both
// calls, no rank hangs and none returns ncclSuccess with a wrong result; the connections are
// realigned, so of the matched all-reduces that follow each is exact on both ranks or fails on
// both, at most one fails, and the last is exact. Its own binary: the process's IB module is
// made once, over the fake host installed first.
#include <gtest/gtest.h>

#include <barrier>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "nccl.h"
#include "transports/ib/ib_net.h"
#include "unit/ib_fake_verbs.h"

using namespace accl;
using namespace accl::ib;

namespace {

constexpr int kRanks = 2;
constexpr int kNext = 3;
constexpr size_t kNextCounts[kNext] = {4, 1 << 16, 1000};

fake::Fabric& installFakeIb() {
  static fake::Fabric fabric;
  static std::shared_ptr<fake::Host> host = [] {
    auto h = fake::roceHost(fabric, {"mlx5_0"});
    setIbVerbsForTesting(h);
    return h;
  }();
  setenv("NCCL_SHM_DISABLE", "1", 1);  // ranks share a host: without this they would use shm
  setenv("NCCL_NET_PLUGIN", "none", 1);
  setenv("NCCL_NET", "IB", 1);
  setenv("NCCL_ALGO", "Ring", 1);
  return fabric;
}

std::mutex gWarnMu;
std::vector<std::string> gWarns;
void warnSink(LogLevel level, uint64_t, const char*, int, const char* text) {
  if (level != LogLevel::Warn) return;
  std::lock_guard<std::mutex> lk(gWarnMu);
  gWarns.push_back(text);
}

// Sum over both ranks of (rank + 1) * (i % 7 + 1): 3 * (i % 7 + 1); true if every element is.
bool exactAllReduce(ncclComm_t comm, int rank, size_t count, ncclResult_t* res) {
  std::vector<int32_t> buf(count);
  for (size_t i = 0; i < count; i++) buf[i] = (rank + 1) * static_cast<int32_t>(i % 7 + 1);
  *res = ncclAllReduce(buf.data(), buf.data(), count, ncclInt32, ncclSum, comm, nullptr);
  if (*res != ncclSuccess) return false;
  for (size_t i = 0; i < count; i++)
    if (buf[i] != 3 * static_cast<int32_t>(i % 7 + 1)) return false;
  return true;
}

TEST(IbMismatch, CountsThatDifferFailNamingBothCallsAndTheNextMatchedCallsAreExact) {
  fake::Fabric& fabric = installFakeIb();
  setLogSink(&warnSink);
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  ncclResult_t mismatched[kRanks] = {ncclSuccess, ncclSuccess};
  ncclResult_t next[kRanks][kNext] = {};
  bool exact[kRanks][kNext] = {}, firstExact[kRanks] = {};
  std::barrier sync(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; r++) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, kRanks, id, r) != ncclSuccess) {
        ADD_FAILURE() << "rank " << r << ": init failed";
        sync.arrive_and_drop();
        return;
      }
      ncclResult_t res;
      firstExact[r] = exactAllReduce(comm, r, 1000, &res);
      sync.arrive_and_wait();
      std::vector<int32_t> buf(512, 1);
      mismatched[r] = ncclAllReduce(buf.data(), buf.data(), r == 0 ? 256 : 512, ncclInt32, ncclSum, comm, nullptr);
      for (int k = 0; k < kNext; k++) exact[r][k] = exactAllReduce(comm, r, kNextCounts[k], &next[r][k]);
      EXPECT_EQ(ncclSuccess, ncclCommDestroy(comm));
    });
  }
  for (auto& t : threads) t.join();
  setLogSink(nullptr);

  bool invalidUsage = false;
  for (int r = 0; r < kRanks; r++) {
    EXPECT_TRUE(firstExact[r]) << "rank " << r << ": the matched all-reduce before the mismatch";
    invalidUsage = invalidUsage || mismatched[r] == ncclInvalidUsage;
    for (int k = 0; k < kNext; k++) {
      invalidUsage = invalidUsage || next[r][k] == ncclInvalidUsage;
      EXPECT_TRUE(next[r][k] != ncclSuccess || exact[r][k])
          << "rank " << r << ": matched all-reduce #" << k << " returned ncclSuccess with a wrong result";
    }
  }
  EXPECT_TRUE(invalidUsage) << "no rank failed with ncclInvalidUsage";
  int failedCalls = 0;
  for (int k = 0; k < kNext; k++) {
    const int failed = (next[0][k] != ncclSuccess) + (next[1][k] != ncclSuccess);
    EXPECT_TRUE(failed == 0 || failed == kRanks) << "matched all-reduce #" << k << " failed on " << failed << " rank";
    failedCalls += failed == kRanks;
  }
  EXPECT_LE(failedCalls, 1);
  EXPECT_TRUE(exact[0][kNext - 1] && exact[1][kNext - 1]) << "the last matched all-reduce is not exact everywhere";
  std::string all;
  bool named = false;
  for (const std::string& w : gWarns) {
    all += w + "\n";
    named = named || (w.find("mismatched calls") != std::string::npos &&
                      w.find("AllReduce(256 x int32, sum)") != std::string::npos &&
                      w.find("AllReduce(512 x int32, sum)") != std::string::npos);
    EXPECT_EQ(std::string::npos, w.find("could not be realigned")) << w;
  }
  EXPECT_TRUE(named) << "no WARN names both calls:\n" << all;
  std::lock_guard<std::recursive_mutex> lk(fabric.mu);
  const uint64_t carried = fabric.bytesByPort[{1, "mlx5_0:1"}];
  EXPECT_GT(carried, uint64_t{1 << 16} * sizeof(int32_t)) << "the IB port carried " << carried << " bytes";
}

}  // namespace
