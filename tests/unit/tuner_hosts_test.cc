// The tuner across hosts: all-reduces take the cheapest algorithm of the cost model
// (sched/cost_model.h), NCCL_ALGO still decides what is allowed, and the reason names the
// predicted times.
#include <gtest/gtest.h>
#include "sched/cost_model.h"
#include "sched/tuner.h"

namespace accl {
namespace {

Algo pick(size_t bytes, int hosts, int perHost, const char* algo = "", std::string* why = nullptr) {
  AlgoPolicy policy;
  EXPECT_EQ(parseAlgoPolicy(algo, &policy), ncclSuccess);
  TopoShape shape{hosts, perHost};
  return chooseAlgo(policy, OpKind::AllReduce, bytes, hosts * perHost, 0, false, &shape, why);
}

TEST(TunerAcrossHosts, SmallAllReducesTakeTheTreeLargeOnesARing) {
  std::string why;
  EXPECT_EQ(pick(8, 8, 1, "", &why), Algo::Tree);
  EXPECT_NE(why.find("cost model, 8 hosts x 1 ranks: Tree"), std::string::npos) << why;
  EXPECT_EQ(pick(64 << 20, 8, 1), Algo::Ring);
  // Several ranks per host: the hierarchical all-reduce puts 2(H-1)/H x S on each host link
  // against the ring's 2(N-1)/N x S.
  EXPECT_EQ(pick(64 << 20, 4, 2), Algo::HierRing);
  EXPECT_EQ(pick(8, 4, 2), Algo::Tree);
}

TEST(TunerAcrossHosts, NcclAlgoStillDecides) {
  EXPECT_EQ(pick(8, 8, 1, "Ring"), Algo::Ring);
  EXPECT_EQ(pick(64 << 20, 4, 2, "Ring,Tree"), Algo::Ring);
  EXPECT_EQ(pick(8, 4, 2, "HierRing"), Algo::HierRing);
  // HierRing needs several ranks on every host: elsewhere the default choice runs.
  EXPECT_NE(pick(8, 8, 1, "HierRing"), Algo::HierRing);
  EXPECT_NE(pick(8, 4, 0, "HierRing"), Algo::HierRing);
}

TEST(CostModel, HierarchicalBeatsTheRingOnlyWhereHostsHoldSeveralRanks) {
  const LinkCosts& links = measuredLinks();
  const size_t big = size_t{128} << 20;
  EXPECT_LT(predictAllReduceUs(Algo::HierRing, big, 8, {4, 2}, links),
            predictAllReduceUs(Algo::Ring, big, 8, {4, 2}, links));
  EXPECT_LT(predictAllReduceUs(Algo::HierRing, 8, 1024, {64, 16}, links),
            predictAllReduceUs(Algo::Ring, 8, 1024, {64, 16}, links));
  EXPECT_LT(predictAllReduceUs(Algo::HierRing, 8, 8, {4, 0}, links), 0);
}

}  // namespace
}  // namespace accl
