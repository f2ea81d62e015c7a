// Peer death in the middle of an all-reduce loop, ranks as processes (fork): every survivor's
// collective fails within 10 s (also ranks that are not the dead rank's ring neighbours),
// ncclCommGetAsyncError reports it, ncclCommAbort of the failed communicator returns within
// 2 s, and ncclCommShrink excluding the dead rank gives a communicator whose all-reduce is
// correct. Over shared memory and over sockets (NCCL_SHM_DISABLE=1).
// Scenario code: tests/mp/failure_scenario.h (also used by tools/accl-failure-timing).
#include <gtest/gtest.h>

#include <string>
#include "mp/failure_scenario.h"

using accl_failure::Result;
using accl_failure::Scenario;

namespace {

constexpr double kDetectLimitMs = 10000;
constexpr double kAbortLimitMs = 2000;

void expectSurvivorsRecover(const Scenario& s, const Result& res) {
  ASSERT_TRUE(res.ok) << res.report;
  ASSERT_EQ(res.ranks.size(), static_cast<size_t>(s.nranks - 1));
  for (const auto& r : res.ranks) {
    SCOPED_TRACE("rank " + std::to_string(r.rank));
    EXPECT_STREQ(r.message, "");
    EXPECT_NE(r.failedResult, ncclSuccess);
    EXPECT_NE(r.asyncError, ncclSuccess) << "ncclCommGetAsyncError did not report the failure";
    EXPECT_LE(res.detectMs(r), kDetectLimitMs);
    EXPECT_GE(r.abortMs, 0);
    EXPECT_LE(r.abortMs, kAbortLimitMs);
    if (s.shrink) {
      EXPECT_EQ(r.shrinkResult, ncclSuccess);
      EXPECT_EQ(r.shrinkNranks, s.nranks - 1);
      EXPECT_EQ(r.shrinkAllReduce, ncclSuccess);
      EXPECT_TRUE(r.shrinkCorrect) << "all-reduce on the shrunk communicator gave a wrong sum";
    }
    printf("[ info     ] rank %d: collective failed (%s) %.0f ms after the kill; async error %s; abort %.1f ms%s\n",
           r.rank, ncclGetErrorString(static_cast<ncclResult_t>(r.failedResult)), res.detectMs(r),
           ncclGetErrorString(static_cast<ncclResult_t>(r.asyncError)), r.abortMs,
           s.shrink ? (r.shrinkCorrect ? "; shrink + all-reduce correct" : "; shrink FAILED") : "");
  }
}

}  // namespace

class KillOneOfFour : public testing::TestWithParam<bool> {};

TEST_P(KillOneOfFour, SurvivorsSeeTheErrorShrinkToThreeAndAllReduceCorrectly) {
  Scenario s;
  s.nranks = 4;
  s.victim = 2;
  s.sockets = GetParam();
  expectSurvivorsRecover(s, accl_failure::run(s));
}

INSTANTIATE_TEST_SUITE_P(, KillOneOfFour, testing::Bool(), [](const testing::TestParamInfo<bool>& info) {
  return info.param ? std::string("OverSockets") : std::string("OverSharedMemory");
});

// Rank 4 of 8 is as far as a rank can be from rank 0 on the bootstrap ring: it learns of the
// death only through the cascade (neighbours fail, close their connections, and so on).
class KillRankZeroOfEight : public testing::TestWithParam<bool> {};

TEST_P(KillRankZeroOfEight, TheFarthestRankSeesTheErrorAndSurvivorsShrinkToSeven) {
  Scenario s;
  s.nranks = 8;
  s.victim = 0;
  s.sockets = GetParam();
  s.count = 1 << 12;
  Result res = accl_failure::run(s);
  expectSurvivorsRecover(s, res);
  bool sawFarthest = false;
  for (const auto& r : res.ranks) {
    if (r.rank != 4) continue;
    sawFarthest = true;
    EXPECT_NE(r.asyncError, ncclSuccess);
    EXPECT_LE(res.detectMs(r), kDetectLimitMs);
  }
  EXPECT_TRUE(sawFarthest) << "rank 4 did not report";
}

INSTANTIATE_TEST_SUITE_P(, KillRankZeroOfEight, testing::Bool(), [](const testing::TestParamInfo<bool>& info) {
  return info.param ? std::string("OverSockets") : std::string("OverSharedMemory");
});
