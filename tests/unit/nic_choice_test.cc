// The network device closest to a rank (topo/nic_choice.h) on tests/unit/data/two_numa_gpu_nic.xml:
// NUMA node 0 holds GPU 0000:11:00.0 and NIC 0000:12:00.0 (mlx5_0, ib0) behind one PCI switch,
// node 1 holds GPU 0000:21:00.0 and NIC 0000:22:00.0 (mlx5_1, ib1); NUMA distance 21 between.
#include <gtest/gtest.h>
#include <string>
#include "topo/nic_choice.h"

using namespace accl::topo;

namespace {

const std::string kXml = std::string(ACCL_TEST_DATA_DIR) + "/two_numa_gpu_nic.xml";

HwTopology twoNuma() {
  HwTopology t;
  EXPECT_EQ(loadHwTopology(&t, kXml), ncclSuccess);
  return t;
}

}  // namespace

TEST(NicChoice, GpuRankTakesTheNicBehindItsPciSwitch) {
  HwTopology t = twoNuma();
  // Interfaces known by name only (what a model topology gives for socket interfaces).
  std::vector<NicCandidate> nics{{"ib0", ""}, {"ib1", ""}};
  NicPick p = chooseClosestNic(t, RankLocality{"0000:21:00.0", 0}, nics);
  EXPECT_EQ(p.index, 1) << p.why;
  EXPECT_NE(p.why.find("closest to GPU 0000:21:00.0: ib1 (0000:22:00.0) 2 PCI hops"), std::string::npos) << p.why;
  EXPECT_NE(p.why.find("others: ib0 (0000:12:00.0) 6 PCI hops"), std::string::npos) << p.why;
  p = chooseClosestNic(t, RankLocality{"0000:11:00.0", 1}, nics);  // the GPU wins over the NUMA node
  EXPECT_EQ(p.index, 0) << p.why;
}

TEST(NicChoice, HostRankTakesTheNicOnItsNumaNode) {
  HwTopology t = twoNuma();
  // Plugin devices known by their sysfs pciPath.
  std::vector<NicCandidate> nics{{"mlx5_0", busIdOfPciPath("/sys/devices/pci0000:10/0000:10:00.0/0000:12:00.0")},
                                 {"mlx5_1", busIdOfPciPath("/sys/devices/pci0000:20/0000:20:00.0/0000:22:00.0")}};
  NicPick p = chooseClosestNic(t, RankLocality{"", 1}, nics);
  EXPECT_EQ(p.index, 1) << p.why;
  EXPECT_NE(p.why.find("closest to the rank's NUMA node 1: mlx5_1 (0000:22:00.0) on NUMA node 1; others: mlx5_0 "
                       "(0000:12:00.0) on NUMA node 0 (distance 21)"),
            std::string::npos)
      << p.why;
  EXPECT_EQ(chooseClosestNic(t, RankLocality{"", 0}, nics).index, 0);
}

TEST(NicChoice, DevicesTheTopologyDoesNotKnowKeepTheRulesOrder) {
  HwTopology t = twoNuma();
  NicPick p = chooseClosestNic(t, RankLocality{"", 1}, {{"veth0", ""}, {"veth1", ""}});
  EXPECT_EQ(p.index, 0);
  EXPECT_NE(p.why.find("no candidate is in the topology: kept the first (veth0 not in the topology)"),
            std::string::npos)
      << p.why;
  // A known one beats an unknown one listed first.
  EXPECT_EQ(chooseClosestNic(t, RankLocality{"", 1}, {{"veth0", ""}, {"ib1", ""}}).index, 1);
  // A rank the topology cannot place keeps the first.
  p = chooseClosestNic(t, RankLocality{"", -1}, {{"ib0", ""}, {"ib1", ""}});
  EXPECT_EQ(p.index, 0);
  EXPECT_NE(p.why.find("unknown to the topology"), std::string::npos) << p.why;
  // Equal distance: the rules' order decides.
  EXPECT_EQ(chooseClosestNic(t, RankLocality{"", 0}, {{"ib0", ""}, {"mlx5_0", ""}}).index, 0);
}

TEST(NicChoice, PciPathsAndInterfacesGiveBusIds) {
  EXPECT_EQ(busIdOfPciPath("/sys/devices/pci0000:20/0000:20:00.0/0000:22:00.0"), "0000:22:00.0");
  EXPECT_EQ(busIdOfPciPath("/sys/devices/pci0000:00/0000:00:03.0/virtio0"), "0000:00:03.0");
  EXPECT_EQ(busIdOfPciPath("/sys/devices/pci0000:3A/0000:3A:00.0/0000:3B:00.1"), "0000:3b:00.1");
  EXPECT_EQ(busIdOfPciPath(""), "");
  EXPECT_EQ(busIdOfPciPath("/sys/devices/virtual/net/lo"), "");
  EXPECT_EQ(busIdOfInterface("lo"), "");  // virtual: no PCI device
  EXPECT_EQ(busIdOfInterface("../../etc"), "");
}
