// The correctness matrix with every rank a separate process (this binary re-executed per
// rank, rendezvous through NCCL_COMM_ID on loopback), over shared memory and over sockets
// (NCCL_SHM_DISABLE=1). What each count tier covers: tests/common/collective_matrix.h.
// ACCL_TEST_FULL=1 adds the 16 MiB tier everywhere and every op at the prime count.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
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
  if (const ChildRole* role = childRole()) return expectMatrixPassesInChild(*role, scope);
  std::vector<std::string> env;
  if (sockets) env.push_back("NCCL_SHM_DISABLE=1");
  ChildResult result = runChildProcesses(n, true, 0, env, 580);
  EXPECT_TRUE(result.ok) << result.report;
}

// All-gathers whose inputs every rank reads in place from its peers' processes (ShmDirect with
// ACCL_SHM_READ_BYTES=1: every size, odd counts, in place and out of place, every type).
class AllGatherReadInPlaceOnProcesses : public testing::TestWithParam<int> {};

TEST_P(AllGatherReadInPlaceOnProcesses, EveryCaseMatchesTheReference) {
  const int n = GetParam();
  MatrixScope scope;
  scope.onlyAllGather = true;
  scope.big = true;
  if (const ChildRole* role = childRole()) return expectMatrixPassesInChild(*role, scope);
  // The variant is real only if the tuner took the in-place reads: the children's logs say so.
  const std::filesystem::path logs =
      std::filesystem::temp_directory_path() / ("accl-read-gather-" + std::to_string(getpid()));
  std::filesystem::create_directories(logs);
  ChildResult result = runChildProcesses(
      n, true, 0,
      {"ACCL_SHM_READ_BYTES=1", "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=TUNING",
       "NCCL_DEBUG_FILE=" + (logs / "rank.%p.log").string()},
      580);
  EXPECT_TRUE(result.ok) << result.report;
  int readers = 0;
  for (const auto& entry : std::filesystem::directory_iterator(logs)) {
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    readers += text.find("(inputs read in place)") != std::string::npos;
  }
  std::filesystem::remove_all(logs);
  EXPECT_EQ(readers, n) << "ranks whose all-gathers read their inputs in place";
}

INSTANTIATE_TEST_SUITE_P(, AllGatherReadInPlaceOnProcesses, testing::Values(2, 3, 4, 8),
                         [](const testing::TestParamInfo<int>& info) {
                           return std::string(kRankWords[info.param]) + "Ranks";
                         });

INSTANTIATE_TEST_SUITE_P(, CollectiveMatrixOnProcesses,
                         testing::Combine(testing::Values(2, 3, 4, 8), testing::Bool()),
                         [](const testing::TestParamInfo<ProcessParam>& info) {
                           return std::string(kRankWords[std::get<0>(info.param)]) + "Ranks" +
                                  (std::get<1>(info.param) ? "OverSockets" : "OverSharedMemory");
                         });
