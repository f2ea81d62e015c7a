// NCCL_IB_HCA rules on a fake port list (this machine has no RDMA device): prefixes, exact
// names, ports, exclusion, and inactive ports never count.
#include <gtest/gtest.h>
#include <string>
#include <vector>
#include "transports/ib/ib_devices.h"

using namespace accl::ib;

namespace {

const std::vector<IbPort> kPorts = {
    {"mlx5_0", 1, true, false}, {"mlx5_1", 1, true, false}, {"mlx5_1", 2, true, true},
    {"mlx5_10", 1, true, false}, {"mlx4_0", 1, false, false},  // mlx4_0 is down
};

std::string names(const std::string& spec) {
  std::string out;
  for (const IbPort& p : usablePorts(kPorts, parseHcaSpec(spec)))
    out += (out.empty() ? "" : " ") + p.device + ":" + std::to_string(p.port);
  return out;
}

}  // namespace

TEST(IbHcaSpec, EmptyAdmitsEveryActivePort) { EXPECT_EQ(names(""), "mlx5_0:1 mlx5_1:1 mlx5_1:2 mlx5_10:1"); }

TEST(IbHcaSpec, NamesArePrefixesUnlessTheListStartsWithEquals) {
  EXPECT_EQ(names("mlx5_1"), "mlx5_1:1 mlx5_1:2 mlx5_10:1");
  EXPECT_EQ(names("=mlx5_1"), "mlx5_1:1 mlx5_1:2");
  EXPECT_EQ(names("mlx4"), "");  // its only port is down
}

TEST(IbHcaSpec, PortSuffixSelectsOnePort) {
  EXPECT_EQ(names("=mlx5_1:2"), "mlx5_1:2");
  EXPECT_EQ(names("mlx5_0:1, =mlx5_1:1"), "mlx5_0:1");  // '=' counts only at the start of the list
  EXPECT_EQ(names("=mlx5_0:1,mlx5_1:1"), "mlx5_0:1 mlx5_1:1");
}

TEST(IbHcaSpec, CaretExcludesTheListedPorts) {
  EXPECT_EQ(names("^mlx5_1"), "mlx5_0:1");
  EXPECT_EQ(names("^=mlx5_1"), "mlx5_0:1 mlx5_10:1");
  EXPECT_EQ(names("^=mlx5_1:2"), "mlx5_0:1 mlx5_1:1 mlx5_10:1");
}

TEST(IbHcaSpec, ParsesItemsAndFlags) {
  HcaSpec s = parseHcaSpec(" ^=mlx5_0:1 , mlx5_2 ");
  EXPECT_TRUE(s.exclude);
  EXPECT_TRUE(s.exact);
  ASSERT_EQ(s.items.size(), 2u);
  EXPECT_EQ(s.items[0].name, "mlx5_0");
  EXPECT_EQ(s.items[0].port, 1);
  EXPECT_EQ(s.items[1].name, "mlx5_2");
  EXPECT_EQ(s.items[1].port, -1);
}

TEST(IbHcaSpec, SystemVerbsListsWithoutCrashingOnAHostWithoutDevices) {
  std::vector<IbPort> ports;
  std::string why;
  ASSERT_EQ(systemVerbs()->listPorts(&ports, &why), ncclSuccess);
  if (ports.empty()) {
    EXPECT_FALSE(why.empty());
  }
}
