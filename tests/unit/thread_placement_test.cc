// Where a rank's helper threads go (topo/thread_placement.h), on a machine this host is not:
// tests/unit/data/two_numa_gpu_nic.xml has NUMA node 0 = CPUs 0-1 with GPU 0000:11:00.0 and
// node 1 = CPUs 2-3 with GPU 0000:21:00.0. Checks NCCL's rule: the GPU's node, else the init
// thread's node, intersected with the process's affinity unless NCCL_IGNORE_CPU_AFFINITY=1.
#include <gtest/gtest.h>
#include <string>
#include "topo/thread_placement.h"

using namespace accl::topo;

namespace {

const std::string kXml = std::string(ACCL_TEST_DATA_DIR) + "/two_numa_gpu_nic.xml";

CpuMask mask(const std::string& list) {
  CpuMask m;
  EXPECT_TRUE(CpuMask::parseList(list, &m)) << list;
  return m;
}

HwTopology twoNuma() {
  HwTopology t;
  EXPECT_EQ(loadHwTopology(&t, kXml), ncclSuccess);
  return t;
}

}  // namespace

TEST(CpuMask, ParsesAndPrintsKernelLists) {
  EXPECT_EQ(mask("0-3,8,10-11").list(), "0-3,8,10-11");
  EXPECT_EQ(mask("5,1,2,3").list(), "1-3,5");
  EXPECT_EQ(mask("").list(), "");
  EXPECT_EQ(mask("0-3").intersect(mask("2-5")).list(), "2-3");
  CpuMask bad;
  EXPECT_FALSE(CpuMask::parseList("3-1", &bad));
  EXPECT_FALSE(CpuMask::parseList("1,,x", &bad));
  EXPECT_FALSE(CpuMask::parseList("99999", &bad));
}

TEST(ThreadPlacement, GpuRankGoesToItsGpusNumaNode) {
  HwTopology t = twoNuma();
  PlacementInput in{"0000:21:00.0", /*currentCpu=*/0, mask("0-3"), false};
  ThreadPlacement p = chooseThreadPlacement(t, in);
  EXPECT_EQ(p.numa, 1);
  EXPECT_EQ(p.cpus.list(), "2-3") << p.why;
  EXPECT_NE(p.why.find("GPU 0000:21:00.0 is on NUMA node 1"), std::string::npos) << p.why;

  in.gpuBusId = "0000:11:00.0";
  in.currentCpu = 3;  // the GPU wins over where init runs
  p = chooseThreadPlacement(t, in);
  EXPECT_EQ(p.numa, 0);
  EXPECT_EQ(p.cpus.list(), "0-1") << p.why;
}

TEST(ThreadPlacement, HostRankGoesToTheInitThreadsNode) {
  HwTopology t = twoNuma();
  ThreadPlacement p = chooseThreadPlacement(t, PlacementInput{"", 3, mask("0-3"), false});
  EXPECT_EQ(p.numa, 1);
  EXPECT_EQ(p.cpus.list(), "2-3") << p.why;
  EXPECT_NE(p.why.find("runs on CPU 3 of NUMA node 1"), std::string::npos) << p.why;
  p = chooseThreadPlacement(t, PlacementInput{"", 1, mask("0-3"), false});
  EXPECT_EQ(p.cpus.list(), "0-1") << p.why;
  // A GPU the topology does not know: fall back to the init thread's node, and say so.
  p = chooseThreadPlacement(t, PlacementInput{"0000:99:00.0", 2, mask("0-3"), false});
  EXPECT_EQ(p.cpus.list(), "2-3") << p.why;
  EXPECT_NE(p.why.find("0000:99:00.0 is not in the topology"), std::string::npos) << p.why;
}

TEST(ThreadPlacement, ProcessAffinityIsRespectedUnlessIgnored) {
  HwTopology t = twoNuma();
  // The process may run on CPUs 1-2 only: node 1 (2-3) shrinks to 2.
  ThreadPlacement p = chooseThreadPlacement(t, PlacementInput{"0000:21:00.0", 1, mask("1-2"), false});
  EXPECT_EQ(p.cpus.list(), "2") << p.why;
  // Confined to node 0 while its GPU hangs off node 1: nothing in common, threads stay put.
  p = chooseThreadPlacement(t, PlacementInput{"0000:21:00.0", 0, mask("0-1"), false});
  EXPECT_TRUE(p.cpus.empty()) << p.cpus.list();
  EXPECT_NE(p.why.find("outside the process's affinity 0-1"), std::string::npos) << p.why;
  // NCCL_IGNORE_CPU_AFFINITY=1: the node's CPUs whatever the process's mask.
  p = chooseThreadPlacement(t, PlacementInput{"0000:21:00.0", 0, mask("0-1"), true});
  EXPECT_EQ(p.cpus.list(), "2-3") << p.why;
  EXPECT_NE(p.why.find("NCCL_IGNORE_CPU_AFFINITY=1"), std::string::npos) << p.why;
}

TEST(ThreadPlacement, SyntheticFourNodesPicksTheRightOne) {
  HwTopology t;
  ASSERT_EQ(loadHwTopology(&t, "", "pack:2 numa:2 core:2 pu:2"), ncclSuccess);
  ASSERT_EQ(t.numa.size(), 4u);
  ThreadPlacement p = chooseThreadPlacement(t, PlacementInput{"", 9, mask("0-15"), false});
  EXPECT_EQ(p.numa, 2);
  EXPECT_EQ(p.cpus.list(), "8-11") << p.why;
}

TEST(ThreadPlacement, CpuOnNoKnownNodeLeavesThreadsAlone) {
  HwTopology t = twoNuma();
  ThreadPlacement p = chooseThreadPlacement(t, PlacementInput{"", 7, mask("0-7"), false});
  EXPECT_TRUE(p.cpus.empty());
  EXPECT_EQ(p.numa, -1);
  EXPECT_NE(p.why.find("keep the process's affinity"), std::string::npos) << p.why;
}
