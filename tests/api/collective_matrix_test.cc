// The correctness matrix with ranks as threads: every collective x datatype x op x placement x
// count x root (see tests/common/collective_matrix.h for what each tier covers), on shared
// memory in this process, and on sockets (NCCL_SHM_DISABLE=1) or with NCCL_ALGO forced in a
// child process so those variables are read fresh. The 16 MiB tier runs on 4 and 8 ranks.
// ACCL_TEST_FULL=1 widens the sweep: every op at the prime count, every root at every count, and
// the 16 MiB tier on every variant.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>
#include "accl.h"
#include "common/collective_matrix.h"
#include "common/rank_runner.h"

using namespace accl_test;

namespace {

const char* kRankWords[] = {"", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight"};

std::string ranksName(int n) { return std::string(kRankWords[n]) + (n == 1 ? "Rank" : "Ranks"); }

MatrixScope defaultScope(int nranks) {
  MatrixScope scope;
  scope.fullOps = fullMatrixRequested();
  scope.big = fullMatrixRequested() || nranks == 4 || nranks == 8;
  return scope;
}

}  // namespace

TEST(LoadedLibrary, IsAcclAndReportsNcclVersion22707) {
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, 22707);
  EXPECT_NE(dlsym(RTLD_DEFAULT, "ncclAcclVersionString"), nullptr)
      << "libnccl.so.2 in this process is not ACCL's (NVIDIA's was loaded?)";
}

// The checker itself: with one output element corrupted per case, every case must fail.
TEST(CollectiveMatrixChecker, ReportsACorruptedOutputElementInEveryCase) {
  MatrixScope scope;
  scope.corruptOutputs = true;
  std::vector<std::string> messages = runMatrixOnThreads(3, scope);
  EXPECT_TRUE(messages.empty()) << joinedLines(messages);
}

class CollectiveMatrixOnThreads : public testing::TestWithParam<int> {};

TEST_P(CollectiveMatrixOnThreads, EveryCaseMatchesTheReferenceOverSharedMemory) {
  const int n = GetParam();
  std::vector<std::string> messages = runMatrixOnThreads(n, defaultScope(n));
  EXPECT_TRUE(messages.empty()) << joinedLines(messages);
}

INSTANTIATE_TEST_SUITE_P(, CollectiveMatrixOnThreads, testing::Values(1, 2, 3, 4, 5, 8),
                         [](const testing::TestParamInfo<int>& info) { return ranksName(info.param); });

class CollectiveMatrixOnThreadsOverSockets : public testing::TestWithParam<int> {};

TEST_P(CollectiveMatrixOnThreadsOverSockets, EveryCaseMatchesTheReferenceWithSharedMemoryDisabled) {
  const int n = GetParam();
  if (const ChildRole* role = childRole()) return expectMatrixPassesInChild(*role, defaultScope(role->nranks));
  ChildResult result = runChildProcesses(1, false, n, {"NCCL_SHM_DISABLE=1"}, 580);
  EXPECT_TRUE(result.ok) << result.report;
}

INSTANTIATE_TEST_SUITE_P(, CollectiveMatrixOnThreadsOverSockets, testing::Values(2, 3, 4, 5, 8),
                         [](const testing::TestParamInfo<int>& info) { return ranksName(info.param); });

// NCCL_ALGO=Ring / Tree / ShmDirect forced for AllReduce, Broadcast (and Bcast) and Reduce.
using ForcedParam = std::tuple<const char*, int, bool>;  // algorithm, ranks, sockets
class ForcedAlgorithmMatrixOnThreads : public testing::TestWithParam<ForcedParam> {};

TEST_P(ForcedAlgorithmMatrixOnThreads, AllReduceBroadcastAndReduceMatchTheReference) {
  const auto [algo, n, sockets] = GetParam();
  MatrixScope scope = defaultScope(n);
  scope.onlyAllReduceBroadcastReduce = true;
  scope.big = fullMatrixRequested();
  if (const ChildRole* role = childRole()) return expectMatrixPassesInChild(*role, scope);
  std::vector<std::string> env = {std::string("NCCL_ALGO=") + algo};
  if (sockets) env.push_back("NCCL_SHM_DISABLE=1");
  if (std::string(algo) == "ShmDirect") env.push_back("ACCL_SHM_DIRECT_CHUNK=65536");  // the prime count: 2-16 chunks
  ChildResult result = runChildProcesses(1, false, n, env, 580);
  EXPECT_TRUE(result.ok) << result.report;
}

INSTANTIATE_TEST_SUITE_P(, ForcedAlgorithmMatrixOnThreads,
                         testing::Combine(testing::Values("Ring", "Tree"), testing::Values(3, 5, 8),
                                          testing::Bool()),
                         [](const testing::TestParamInfo<ForcedParam>& info) {
                           return std::string(std::get<0>(info.param)) + "On" + ranksName(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "OverSockets" : "OverSharedMemory");
                         });

// All-gathers read in place from the other ranks' buffers (ACCL_SHM_READ_BYTES=1), ranks as
// threads of one process: the reads are plain copies there.
class AllGatherReadInPlaceOnThreads : public testing::TestWithParam<int> {};

TEST_P(AllGatherReadInPlaceOnThreads, EveryCaseMatchesTheReference) {
  MatrixScope scope;
  scope.onlyAllGather = true;
  scope.big = true;
  if (const ChildRole* role = childRole()) return expectMatrixPassesInChild(*role, scope);
  ChildResult result = runChildProcesses(1, false, GetParam(), {"ACCL_SHM_READ_BYTES=1"}, 580);
  EXPECT_TRUE(result.ok) << result.report;
}

INSTANTIATE_TEST_SUITE_P(, AllGatherReadInPlaceOnThreads, testing::Values(2, 3, 8),
                         [](const testing::TestParamInfo<int>& info) { return ranksName(info.param); });

// AllPairs forced (every rank sends its input to every peer and folds them in rank order): every
// size, piece by piece, over sockets (where the tuner picks it for small 2-rank all-reduces) and
// over shared-memory rings.
INSTANTIATE_TEST_SUITE_P(AllPairs, ForcedAlgorithmMatrixOnThreads,
                         testing::Values(ForcedParam{"AllPairs", 1, true}, ForcedParam{"AllPairs", 2, true},
                                         ForcedParam{"AllPairs", 3, true}, ForcedParam{"AllPairs", 4, true},
                                         ForcedParam{"AllPairs", 3, false}),
                         [](const testing::TestParamInfo<ForcedParam>& info) {
                           return std::string(std::get<0>(info.param)) + "On" + ranksName(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "OverSockets" : "OverSharedMemory");
                         });

// ShmDirect (the shared-memory board) forced: all-reduces of every size run on it, in chunks of
// its capacity; without shared memory it cannot run.
INSTANTIATE_TEST_SUITE_P(ShmDirect, ForcedAlgorithmMatrixOnThreads,
                         testing::Combine(testing::Values("ShmDirect"), testing::Values(2, 3, 5, 8),
                                          testing::Values(false)),
                         [](const testing::TestParamInfo<ForcedParam>& info) {
                           return std::string(std::get<0>(info.param)) + "On" + ranksName(std::get<1>(info.param));
                         });
