// The collective kernel's grid tuner (sched/device_grid.h, issue 41): one small block per task
// for a few bytes, at least 16 blocks of 512 threads per rank from 1 MiB (64 MiB included),
// scaled by the device's SMs and bounded by what one launch may hold.
#include <gtest/gtest.h>
#include "collective_args.h"
#include "sched/device_grid.h"

namespace accl {
namespace {

TEST(DeviceGridTuner, AFewBytesGetOneSmallBlock) {
  for (size_t bytes : {size_t{0}, size_t{8}, size_t{4096}, size_t{60000}}) {
    const DeviceGrid g = chooseDeviceGrid(OpKind::AllReduce, bytes, 2, 132);
    EXPECT_EQ(1, g.blocksPerRank) << bytes;
    EXPECT_LE(g.threads, 128u) << bytes;
    EXPECT_EQ(0u, g.threads % 64) << bytes;
  }
}

TEST(DeviceGridTuner, From1MiBSixteenBlocksOf512ThreadsPerRankOnA132SmGpu) {
  for (size_t bytes : {size_t{1} << 20, size_t{64} << 20, size_t{1} << 30})
    for (int nranks : {2, 4, 8}) {
      const DeviceGrid g = chooseDeviceGrid(OpKind::AllReduce, bytes, nranks, 132);
      EXPECT_EQ(16, g.blocksPerRank) << bytes << " bytes, " << nranks << " ranks";
      EXPECT_EQ(512u, g.threads) << bytes;
    }
}

TEST(DeviceGridTuner, GrowsWithTheMessageAndTheSmCount) {
  int last = 0;
  for (size_t bytes = 64 << 10; bytes <= (1 << 20); bytes *= 2) {
    const int b = chooseDeviceGrid(OpKind::AllGather, bytes, 2, 132).blocksPerRank;
    EXPECT_GE(b, last) << bytes;
    last = b;
  }
  EXPECT_EQ(32, chooseDeviceGrid(OpKind::AllReduce, 64 << 20, 2, 264).blocksPerRank);
  EXPECT_EQ(16, chooseDeviceGrid(OpKind::AllReduce, 64 << 20, 2, 0).blocksPerRank);  // unknown: as 132
  EXPECT_LE(chooseDeviceGrid(OpKind::AllReduce, 64 << 20, 2, 100000).blocksPerRank, kern::kMaxLaunchBlocks);
}

}  // namespace
}  // namespace accl
