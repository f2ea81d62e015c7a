// NCCL_ALGO grammar (spec/nccl-env.md §4) and the tuner's choice.
#include <gtest/gtest.h>
#include "sched/tuner.h"

namespace accl {
namespace {

constexpr int kBroadcast = 0, kAllGather = 2, kAllReduce = 4;

TEST(AlgoPolicy, EmptyValueAllowsEverything) {
  AlgoPolicy p;
  ASSERT_EQ(parseAlgoPolicy("", &p), ncclSuccess);
  for (uint8_t a : p.allowed) EXPECT_EQ(a, kAlgoRing | kAlgoTree);
}

TEST(AlgoPolicy, ListAppliesToEveryFunctionCaseInsensitively) {
  AlgoPolicy p;
  ASSERT_EQ(parseAlgoPolicy("rInG", &p), ncclSuccess);
  for (uint8_t a : p.allowed) EXPECT_EQ(a, kAlgoRing);
}

TEST(AlgoPolicy, CaretExcludesTheListedAlgorithms) {
  AlgoPolicy p;
  ASSERT_EQ(parseAlgoPolicy("^tree", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllReduce], kAlgoRing);
}

TEST(AlgoPolicy, PerFunctionEntriesOverrideTheFirstEntry) {
  AlgoPolicy p;
  ASSERT_EQ(parseAlgoPolicy("ring;allreduce:tree,ring;broadcast:^ring", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllReduce], kAlgoRing | kAlgoTree);
  EXPECT_EQ(p.allowed[kBroadcast], kAlgoTree);
  EXPECT_EQ(p.allowed[kAllGather], kAlgoRing);
}

TEST(AlgoPolicy, UnknownAlgorithmOrFunctionIsInvalidUsage) {
  AlgoPolicy p;
  EXPECT_EQ(parseAlgoPolicy("rings", &p), ncclInvalidUsage);
  EXPECT_EQ(parseAlgoPolicy("allreduced:ring", &p), ncclInvalidUsage);
  EXPECT_EQ(parseAlgoPolicy("ring;tree", &p), ncclInvalidUsage);  // later entry needs a function
}

TEST(AlgoPolicy, NoImplementedAlgorithmLeftIsInvalidUsage) {
  AlgoPolicy p;
  EXPECT_EQ(parseAlgoPolicy("NVLS", &p), ncclInvalidUsage);
  EXPECT_EQ(parseAlgoPolicy("allreduce:^ring,tree", &p), ncclInvalidUsage);
}

TEST(Tuner, SmallAllReducesUseTheLatencyAlgorithmAndLargeOnesTheRing) {
  AlgoPolicy p;
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 4), Algo::Tree);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 64 << 20, 4), Algo::Ring);
  ASSERT_EQ(parseAlgoPolicy("tree", &p), ncclSuccess);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 64 << 20, 4), Algo::Tree);
}

}  // namespace
}  // namespace accl
