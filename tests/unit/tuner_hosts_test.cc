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
  EXPECT_EQ(pick(8, 4, 2), Algo::Tree);
  // On the measured pods (one NIC, ranks sharing 2 vCPUs) HierRing's host phases cost more
  // than the link bytes it saves: the ring, as measured.
  EXPECT_EQ(pick(64 << 20, 4, 2), Algo::Ring);
}

TEST(TunerAcrossHosts, ManyNicsAndFastHostsTakeHierRingForLargeAllReduces) {
  // 64 hosts x 16 ranks, 8 NICs of 50 GB/s: HierRing's 16 slice rings use every NIC, the
  // ring's one edge out of each host uses one; small all-reduces take the log-depth tree.
  const LinkCosts links{{3, 150}, {10, 50}};
  TopoShape shape{64, 16};
  shape.nicsPerHost = 8;
  std::string why;
  EXPECT_EQ(cheapestAllReduce(kAlgoAll, size_t{256} << 20, 1024, shape, links, &why), Algo::HierRing) << why;
  EXPECT_EQ(cheapestAllReduce(kAlgoAll, 8, 1024, shape, links), Algo::Tree);
  EXPECT_EQ(cheapestAllReduce(kAlgoRing | kAlgoTree, size_t{256} << 20, 1024, shape, links), Algo::Ring);
}

TEST(TunerAcrossHosts, NcclAlgoStillDecides) {
  EXPECT_EQ(pick(8, 8, 1, "Ring"), Algo::Ring);
  EXPECT_EQ(pick(64 << 20, 4, 2, "Ring,Tree"), Algo::Ring);
  EXPECT_EQ(pick(8, 4, 2, "HierRing"), Algo::HierRing);
  // HierRing needs several ranks on every host: elsewhere the default choice runs.
  EXPECT_NE(pick(8, 8, 1, "HierRing"), Algo::HierRing);
  EXPECT_NE(pick(8, 4, 0, "HierRing"), Algo::HierRing);
}

Algo pickFor(OpKind kind, size_t bytes, int hosts, int perHost, const char* algo = "", std::string* why = nullptr) {
  AlgoPolicy policy;
  EXPECT_EQ(parseAlgoPolicy(algo, &policy), ncclSuccess);
  TopoShape shape{hosts, perHost};
  return chooseAlgo(policy, kind, bytes, hosts * perHost, 0, false, &shape, why);
}

TEST(TunerAcrossHosts, AllGatherAndReduceScatterTakeHierRingWhereTheModelFindsItCheaper) {
  // Measured pods (perf/pods_topo_bench.sh COLL=...): HierRing's all-gather, whose host phase
  // only copies, ran 1.12-1.16x the ring from 4 MiB; its reduce-scatter, whose host phase
  // reduces the whole input, 0.72x at 32 MiB.
  std::string why;
  EXPECT_EQ(pickFor(OpKind::AllGather, 4 << 20, 4, 2, "", &why), Algo::HierRing);
  EXPECT_NE(why.find("cost model, 4 hosts x 2 ranks: Ring"), std::string::npos) << why;
  EXPECT_EQ(pickFor(OpKind::ReduceScatter, 4 << 20, 4, 2), Algo::Ring);
  // NCCL_ALGO still decides, and HierRing needs several ranks on every host.
  EXPECT_EQ(pickFor(OpKind::AllGather, 4 << 20, 4, 2, "Ring"), Algo::Ring);
  EXPECT_EQ(pickFor(OpKind::ReduceScatter, 4 << 20, 4, 2, "HierRing"), Algo::HierRing);
  EXPECT_EQ(pickFor(OpKind::AllGather, 4 << 20, 8, 1, "HierRing"), Algo::Ring);
  EXPECT_EQ(pickFor(OpKind::AllGather, 4 << 20, 1, 8), Algo::Ring);
}

TEST(CostModel, RanksCrowdingOneKernelsCoresTakeATreeOfFewerMessages) {
  // 8 pods x 1 rank on one 2-core machine (the measured pods): recursive doubling's rounds
  // have all 8 ranks send at once; the flat tree's 14 messages, two hops, beat its 24 there.
  // 4 pods x 2 ranks: the binomial tree (its levels inside the hosts are cheap). With a core
  // per rank doubling's 3 rounds beat the binomial tree's 6 levels and the flat root's 14
  // messages.
  TopoShape crowded{8, 1};
  crowded.kernelRanks = 8;
  crowded.kernelCores = 2;
  TopoShape crowdedPairs{4, 2};
  crowdedPairs.kernelRanks = 8;
  crowdedPairs.kernelCores = 2;
  const TopoShape roomy{8, 1};
  const LinkCosts& links = measuredLinks();
  EXPECT_EQ(cheaperTreeShape(8, 8, crowded, links), TreeShape::Flat);
  EXPECT_EQ(cheaperTreeShape(8, 8, crowdedPairs, links), TreeShape::Binomial);
  EXPECT_EQ(cheaperTreeShape(8, 8, roomy, links), TreeShape::Doubling);
  EXPECT_LT(predictTreeUs(TreeShape::Flat, 8, 8, crowded, links),
            0.7 * predictTreeUs(TreeShape::Doubling, 8, 8, crowded, links));
  EXPECT_NEAR(predictTreeUs(TreeShape::Doubling, 8, 8, roomy, links),
              0.5 * predictTreeUs(TreeShape::Binomial, 8, 8, roomy, links), 1.0);
  // Eight ranks on eight cores of one kernel are not crowded.
  TopoShape enough = crowded;
  enough.kernelCores = 8;
  EXPECT_EQ(cheaperTreeShape(8, 8, enough, links), TreeShape::Doubling);
  // The flat root's N-1 messages: never at 1,024 ranks, nor without a figure for them.
  EXPECT_EQ(cheaperTreeShape(8, 1024, TopoShape{1024, 1}, links), TreeShape::Doubling);
  LinkCosts noMessageCost = links;
  noMessageCost.messageUs = 0;
  EXPECT_LT(predictTreeUs(TreeShape::Flat, 8, 8, crowded, noMessageCost), 0);
  EXPECT_NE(cheaperTreeShape(8, 8, crowded, noMessageCost), TreeShape::Flat);
  // The tuner says why, and the ring's 8 B steps (two slices, two messages) are not crowded:
  // the tree's 8 B is predicted at most 0.6x the ring's.
  std::string why;
  EXPECT_EQ(cheapestAllReduce(kAlgoAll, 8, 8, crowded, links, &why), Algo::Tree);
  EXPECT_NE(why.find("8 ranks on one kernel's 2 cores: Tree/flat"), std::string::npos) << why;
  EXPECT_LE(predictAllReduceUs(Algo::Tree, 8, 8, crowded, links),
            0.6 * predictAllReduceUs(Algo::Ring, 8, 8, crowded, links));
  // Larger buffers give every rank a slice: the ring's steps crowd the cores as well, and
  // large ones still take the ring.
  EXPECT_GT(predictAllReduceUs(Algo::Ring, 4096, 8, crowded, links),
            3 * predictAllReduceUs(Algo::Ring, 8, 8, crowded, links));
  EXPECT_EQ(cheapestAllReduce(kAlgoAll, size_t{64} << 20, 8, crowded, links), Algo::Ring);
}

TEST(CostModel, HierarchicalBeatsTheRingOnlyWhereHostsHoldSeveralRanks) {
  // With host copies cheap against the link, 2(H-1)/H x S on each host link beats the ring's
  // 2(N-1)/N x S (4 x 2: 1.5 S against 1.75 S).
  const LinkCosts links{{3, 150}, {50, 0.24}};
  const size_t big = size_t{128} << 20;
  const double hier = predictAllReduceUs(Algo::HierRing, big, 8, {4, 2}, links);
  const double ring = predictAllReduceUs(Algo::Ring, big, 8, {4, 2}, links);
  EXPECT_LT(hier, ring);
  EXPECT_NEAR(hier / ring, 1.5 / 1.75, 0.02);
  EXPECT_LT(predictAllReduceUs(Algo::HierRing, 8, 1024, {64, 16}, links),
            predictAllReduceUs(Algo::Ring, 8, 1024, {64, 16}, links));
  EXPECT_LT(predictAllReduceUs(Algo::HierRing, 8, 8, {4, 0}, links), 0);
}

}  // namespace
}  // namespace accl
