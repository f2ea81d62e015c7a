// NCCL_ALGO grammar (spec/nccl-env.md §4) and the tuner's choice.
#include <gtest/gtest.h>
#include "sched/tuner.h"

namespace accl {
namespace {

constexpr int kBroadcast = 0, kAllGather = 2, kReduceScatter = 3, kAllReduce = 4;

TEST(AlgoPolicy, EmptyValueAllowsEverything) {
  AlgoPolicy p;
  ASSERT_EQ(parseAlgoPolicy("", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllReduce], kAlgoRing | kAlgoTree | kAlgoShmDirect | kAlgoAllPairs | kAlgoHierRing);
  EXPECT_EQ(p.allowed[kAllGather], kAlgoRing | kAlgoTree | kAlgoShmDirect | kAlgoHierRing);
  EXPECT_EQ(p.allowed[kReduceScatter], kAlgoRing | kAlgoTree | kAlgoHierRing);
  EXPECT_EQ(p.allowed[kBroadcast], kAlgoRing | kAlgoTree);
}

TEST(AlgoPolicy, ListAppliesToEveryFunctionCaseInsensitively) {
  AlgoPolicy p;
  ASSERT_EQ(parseAlgoPolicy("rInG", &p), ncclSuccess);
  for (uint8_t a : p.allowed) EXPECT_EQ(a, kAlgoRing);
}

TEST(AlgoPolicy, CaretExcludesTheListedAlgorithms) {
  AlgoPolicy p;
  ASSERT_EQ(parseAlgoPolicy("^tree", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllReduce], kAlgoRing | kAlgoShmDirect | kAlgoAllPairs | kAlgoHierRing);
  EXPECT_EQ(p.allowed[kAllGather], kAlgoRing | kAlgoShmDirect | kAlgoHierRing);
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
  EXPECT_EQ(parseAlgoPolicy("broadcast:^ring,tree", &p), ncclInvalidUsage);  // ShmDirect has no broadcast
  EXPECT_EQ(parseAlgoPolicy("broadcast:shmdirect", &p), ncclInvalidUsage);
  EXPECT_EQ(parseAlgoPolicy("allgather:allpairs", &p), ncclInvalidUsage);  // AllPairs: all-reduce only
  EXPECT_EQ(parseAlgoPolicy("allreduce:^ring,tree,shmdirect,allpairs,hierring", &p), ncclInvalidUsage);
}

TEST(AlgoPolicy, AllPairsAloneForcesItForAllReducesAndLeavesTheRestAlone) {
  AlgoPolicy p;
  ASSERT_EQ(parseAlgoPolicy("allpairs", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllReduce], kAlgoAllPairs);
  EXPECT_EQ(p.allowed[kAllGather], kAlgoRing | kAlgoTree);
  EXPECT_EQ(p.allowed[kBroadcast], kAlgoRing | kAlgoTree);
  ASSERT_EQ(parseAlgoPolicy("ShmDirect,AllPairs", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllReduce], kAlgoShmDirect | kAlgoAllPairs);
  EXPECT_EQ(p.allowed[kAllGather], kAlgoShmDirect);
  EXPECT_EQ(p.allowed[kBroadcast], kAlgoRing | kAlgoTree);
  ASSERT_EQ(parseAlgoPolicy("Ring,AllPairs", &p), ncclSuccess);  // names Ring: the others get Ring
  EXPECT_EQ(p.allowed[kAllReduce], kAlgoRing | kAlgoAllPairs);
  EXPECT_EQ(p.allowed[kBroadcast], kAlgoRing);
}

TEST(AlgoPolicy, HierRingIsAnAllReduceAllGatherAndReduceScatterAlgorithm) {
  AlgoPolicy p;
  ASSERT_EQ(parseAlgoPolicy("HierRing", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllReduce], kAlgoHierRing);
  EXPECT_EQ(p.allowed[kAllGather], kAlgoHierRing);
  EXPECT_EQ(p.allowed[kReduceScatter], kAlgoHierRing);
  EXPECT_EQ(p.allowed[kBroadcast], kAlgoRing | kAlgoTree);
  ASSERT_EQ(parseAlgoPolicy("allgather:hierring", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllGather], kAlgoHierRing);
  EXPECT_EQ(parseAlgoPolicy("broadcast:hierring", &p), ncclInvalidUsage);
}

TEST(AlgoPolicy, ShmDirectAloneForcesItWhereItExistsAndLeavesTheRestAlone) {
  AlgoPolicy p;
  ASSERT_EQ(parseAlgoPolicy("ShmDirect", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllReduce], kAlgoShmDirect);
  EXPECT_EQ(p.allowed[kAllGather], kAlgoShmDirect);
  EXPECT_EQ(p.allowed[kBroadcast], kAlgoRing | kAlgoTree);
  ASSERT_EQ(parseAlgoPolicy("allreduce:^ring,tree,allpairs,hierring", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllReduce], kAlgoShmDirect);
  ASSERT_EQ(parseAlgoPolicy("allreduce:^ring,tree,hierring", &p), ncclSuccess);
  EXPECT_EQ(p.allowed[kAllReduce], kAlgoShmDirect | kAlgoAllPairs);
}

TEST(Tuner, SmallAllReducesUseTheLatencyAlgorithmAndLargeOnesTheRing) {
  AlgoPolicy p;
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 4), Algo::Tree);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 64 << 20, 4), Algo::Ring);
  ASSERT_EQ(parseAlgoPolicy("tree", &p), ncclSuccess);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 64 << 20, 4), Algo::Tree);
}

TEST(Tuner, ShmDirectRunsSmallAllReducesAndAllGathersWhenThereIsABoard) {
  AlgoPolicy p;
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 8, 4096), Algo::ShmDirect);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllGather, 4096, 8, 4096), Algo::ShmDirect);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 512 << 10, 8, 4096), Algo::ShmDirect);  // in board-sized chunks
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, (512 << 10) + 4, 8, 4096), Algo::Ring);  // above the limit
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8 << 10, 2, 4096), Algo::ShmDirect);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, (8 << 10) + 4, 2, 4096), Algo::Tree);  // np2: the ring family
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 1 << 20, 2, 4096), Algo::Tree);        // one exchange, no copy
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, (1 << 20) + 4, 2, 4096), Algo::Ring);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, (64 << 10) + 4, 3, 0), Algo::Ring);
  EXPECT_EQ(treeLimit(2, true, -1), size_t{1} << 20);
  EXPECT_EQ(treeLimit(2, false, -1), size_t{64} << 10);
  EXPECT_EQ(treeLimit(8, true, -1), size_t{64} << 10);
  EXPECT_EQ(treeLimit(2, true, 4096), 4096u);  // ACCL_TREE_THRESHOLD
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 8, 0), Algo::Tree);  // no board: ranks on several hosts
  EXPECT_EQ(chooseAlgo(p, OpKind::Broadcast, 8, 8, 4096), Algo::Tree);
  ASSERT_EQ(parseAlgoPolicy("^ShmDirect", &p), ncclSuccess);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 8, 4096), Algo::Tree);
  ASSERT_EQ(parseAlgoPolicy("ShmDirect", &p), ncclSuccess);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 1 << 20, 8, 4096), Algo::ShmDirect);  // forced: in chunks
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 8, 0), Algo::Tree);                // no board: the default
}

TEST(Tuner, ShmDirectAllReducesFoldInSlicesFrom32KiB) {
  EXPECT_FALSE(useShmSlices(OpKind::AllReduce, (32 << 10) - 4, 4));
  EXPECT_TRUE(useShmSlices(OpKind::AllReduce, 32 << 10, 4));
  EXPECT_TRUE(useShmSlices(OpKind::AllReduce, 512 << 10, 8));
  EXPECT_FALSE(useShmSlices(OpKind::AllGather, 512 << 10, 8));  // gathers have nothing to fold
  EXPECT_EQ(shmSliceMin(OpKind::AllReduce, 4, 0), 0u);         // ACCL_SHM_SLICE_BYTES=0: never
  EXPECT_EQ(shmSliceMin(OpKind::AllReduce, 4, 4096), 4096u);
}

TEST(Tuner, ShmDirectLimitsFollowTheMeasuredCrossoversByOpAndRankCount) {
  EXPECT_EQ(shmDirectLimit(OpKind::AllReduce, 2, -1), size_t{8} << 10);
  EXPECT_EQ(shmDirectLimit(OpKind::AllReduce, 3, -1), size_t{512} << 10);
  EXPECT_EQ(shmDirectLimit(OpKind::AllReduce, 8, -1), size_t{512} << 10);
  EXPECT_EQ(shmDirectLimit(OpKind::AllGather, 2, -1), size_t{8} << 10);
  EXPECT_EQ(shmDirectLimit(OpKind::AllGather, 3, -1), size_t{256} << 10);
  EXPECT_EQ(shmDirectLimit(OpKind::AllGather, 4, -1), size_t{256} << 10);
  EXPECT_EQ(shmDirectLimit(OpKind::AllGather, 16, -1), size_t{512} << 10);
  EXPECT_EQ(shmDirectLimit(OpKind::Broadcast, 4, -1), 0u);
  EXPECT_EQ(shmDirectLimit(OpKind::Broadcast, 4, 4096), 0u);  // the override never adds ops
  EXPECT_EQ(shmDirectLimit(OpKind::AllReduce, 4, 4096), 4096u);  // ACCL_SHM_DIRECT_BYTES replaces the table
  EXPECT_EQ(shmDirectLimit(OpKind::AllGather, 8, 0), 0u);        // 0: never by the tuner
  AlgoPolicy p;
  EXPECT_EQ(chooseAlgo(p, OpKind::AllGather, 16 << 10, 2, 4096), Algo::Ring);       // np2: above 8 KiB
  EXPECT_EQ(chooseAlgo(p, OpKind::AllGather, 16 << 10, 4, 4096), Algo::ShmDirect);  // np4: up to 256 KiB
  EXPECT_EQ(chooseAlgo(p, OpKind::AllGather, 1 << 20, 8, 4096), Algo::Ring);
}

// AllPairs: all-reduces over connections (no board). The table: np2 up to 64 KiB, where it sends
// what recursive doubling sends; never above 2 ranks, where it lost on the measured machine.
TEST(Tuner, AllPairsRunsSmallTwoRankAllReducesWithoutABoardAndAnySizeWhenForced) {
  AlgoPolicy p;
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 2, 0), Algo::AllPairs);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 64 << 10, 2, 0), Algo::AllPairs);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, (64 << 10) + 4, 2, 0), Algo::Ring);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 3, 0), Algo::Tree);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 2, 4096), Algo::ShmDirect);  // a board wins
  EXPECT_EQ(chooseAlgo(p, OpKind::Broadcast, 8, 2, 0), Algo::Tree);         // all-reduces only
  EXPECT_EQ(allPairsLimit(2, -1), size_t{64} << 10);
  EXPECT_EQ(allPairsLimit(4, -1), 0u);
  EXPECT_EQ(allPairsLimit(8, 4096), 4096u);  // ACCL_ALL_PAIRS_BYTES replaces the table
  EXPECT_EQ(allPairsLimit(2, 0), 0u);        // 0: never by the tuner
  ASSERT_EQ(parseAlgoPolicy("^AllPairs", &p), ncclSuccess);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 2, 0), Algo::Tree);
  ASSERT_EQ(parseAlgoPolicy("AllPairs", &p), ncclSuccess);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 1 << 20, 8, 0), Algo::AllPairs);     // forced: piece by piece
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 8, 4096), Algo::AllPairs);        // over shared-memory rings too
  EXPECT_EQ(chooseAlgo(p, OpKind::AllGather, 8, 8, 0), Algo::Ring);
  ASSERT_EQ(parseAlgoPolicy("ShmDirect,AllPairs", &p), ncclSuccess);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 8, 4096), Algo::ShmDirect);
  EXPECT_EQ(chooseAlgo(p, OpKind::AllReduce, 8, 8, 0), Algo::AllPairs);  // no board
}

// In-place reads (ACCL_SHM_READ_BYTES) are opt-in: the tuner's table never picks them.
TEST(Tuner, AllGathersReadInputsInPlaceOnlyWhenAskedAndEveryRankCanBeRead) {
  EXPECT_EQ(shmReadMin(OpKind::AllGather, 2, -1), 0u);
  EXPECT_EQ(shmReadMin(OpKind::AllGather, 8, -1), 0u);
  EXPECT_EQ(shmReadMin(OpKind::AllGather, 2, 1 << 20), size_t{1} << 20);  // ACCL_SHM_READ_BYTES
  EXPECT_EQ(shmReadMin(OpKind::AllReduce, 2, 4096), 0u);                  // all-gathers only
  AlgoPolicy p;
  EXPECT_EQ(chooseAlgo(p, OpKind::AllGather, 1 << 20, 2, 4096, true), Algo::Ring);  // default: never
  EXPECT_FALSE(useShmRead(OpKind::AllGather, 1 << 20, 2, true));
}

}  // namespace
}  // namespace accl
