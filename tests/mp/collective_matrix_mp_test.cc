// The correctness matrix with every rank a separate process (this binary re-executed per
// rank, rendezvous through NCCL_COMM_ID on loopback), over shared memory and over sockets
// (NCCL_SHM_DISABLE=1). What each count tier covers: tests/common/collective_matrix.h.
// ACCL_TEST_FULL=1 adds the 16 MiB tier everywhere and every op at the prime count.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>
#include "common/collective_matrix.h"
#include "common/rank_runner.h"

using namespace accl_test;

namespace {

const char* kRankWords[] = {"", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight"};

}  // namespace

using ProcessParam = std::tuple<int, bool>;  // ranks, sockets
class CollectiveMatrixOnProcesses : public testing::TestWithParam<ProcessParam> {};

TEST_P(CollectiveMatrixOnProcesses, EveryCaseMatchesTheReference) {
  const auto [n, sockets] = GetParam();
  MatrixScope scope;
  scope.fullOps = fullMatrixRequested();
  scope.big = fullMatrixRequested() || n == 3;
  if (const ChildRole* role = childRole()) {
    std::vector<std::string> messages = runMatrixAsRank(*role, scope);
    std::string text;
    for (const std::string& m : messages) text += m + "\n";
    EXPECT_TRUE(messages.empty()) << text;
    return;
  }
  std::vector<std::string> env;
  if (sockets) env.push_back("NCCL_SHM_DISABLE=1");
  ChildResult result = runChildProcesses(n, true, 0, env, 580);
  EXPECT_TRUE(result.ok) << result.report;
}

INSTANTIATE_TEST_SUITE_P(, CollectiveMatrixOnProcesses,
                         testing::Combine(testing::Values(2, 3, 4, 8), testing::Bool()),
                         [](const testing::TestParamInfo<ProcessParam>& info) {
                           return std::string(kRankWords[std::get<0>(info.param)]) + "Ranks" +
                                  (std::get<1>(info.param) ? "OverSockets" : "OverSharedMemory");
                         });
