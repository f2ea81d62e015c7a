// Collectives through the IB net module striped over two ports (NCCL_IB_HCA=mlx5_0,mlx5_1 on
// the fake fabric, tests/unit/ib_fake_verbs.h): four thread ranks with shared memory off and
// NCCL_NET=IB, as in ib_net_coll_test.cc, but every connection has QPs on both ports and
// stripes each message over them (transports/ib/ib_rails.h). In the middle of an all-reduce
// one port goes down (every QP on it goes to the error state): the work on it moves to the
// other port, the result is exact, and a WARN names the port and the peer; once the port is
// active again it carries its half again within ACCL_RAIL_RETRY_SEC. Its own binary: the
// process's IB module is made once, over the fake host installed first (each test runs in a
// process of its own under CTest).
#include <gtest/gtest.h>
#include <cstdint>
#include <cstdlib>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>
#include "base/log.h"
#include "nccl.h"
#include "transports/ib/ib_net.h"
#include "unit/ib_fake_verbs.h"

using namespace accl;
using namespace accl::ib;

namespace {

constexpr int kRanks = 4;

struct FakeIb {
  fake::Fabric fabric;
  std::shared_ptr<fake::Host> host;
};
FakeIb& installFakeIb() {
  static FakeIb& ib = []() -> FakeIb& {
    static FakeIb f;
    f.host = fake::roceHost(f.fabric, {"mlx5_0", "mlx5_1", "mlx5_2"});
    setIbVerbsForTesting(f.host);
    return f;
  }();
  setenv("NCCL_SHM_DISABLE", "1", 1);  // ranks share a host: without this they would use shm
  setenv("NCCL_NET_PLUGIN", "none", 1);
  setenv("NCCL_NET", "IB", 1);
  setenv("NCCL_IB_HCA", "mlx5_0,mlx5_1", 1);  // mlx5_2 is not admitted: not a rail
  return ib;
}

uint64_t portBytes(fake::Fabric& f, const char* port) {
  std::lock_guard<std::recursive_mutex> lk(f.mu);
  return f.bytesByPort[{1, port}];
}

std::mutex gWarnMu;
std::vector<std::string> gWarns;
void warnSink(LogLevel level, uint64_t, const char*, int, const char* text) {
  if (level != LogLevel::Warn) return;
  std::lock_guard<std::mutex> lk(gWarnMu);
  gWarns.push_back(text);
}

// An all-reduce of int32 sums over every rank, checked element by element; the number of
// wrong elements per rank.
std::vector<size_t> allReduceErrors(ncclComm_t* comms, size_t n, int salt) {
  std::vector<std::vector<int32_t>> in(kRanks, std::vector<int32_t>(n)), out(kRanks, std::vector<int32_t>(n, -1));
  for (int r = 0; r < kRanks; r++)
    for (size_t i = 0; i < n; i++) in[r][i] = static_cast<int32_t>((i + salt) % 100003) * (r + 1) + r;
  std::vector<size_t> bad(kRanks, n);
  if (ncclGroupStart() != ncclSuccess) return bad;
  for (int r = 0; r < kRanks; r++)
    if (ncclAllReduce(in[r].data(), out[r].data(), n, ncclInt32, ncclSum, comms[r], nullptr) != ncclSuccess) return bad;
  if (ncclGroupEnd() != ncclSuccess) return bad;
  for (int r = 0; r < kRanks; r++) {
    bad[r] = 0;
    for (size_t i = 0; i < n; i++) {
      int32_t want = 0;
      for (int q = 0; q < kRanks; q++) want += static_cast<int32_t>((i + salt) % 100003) * (q + 1) + q;
      bad[r] += out[r][i] != want;
    }
  }
  return bad;
}

// How many WARNs caught by warnSink match `pattern`.
size_t warnsMatching(const char* pattern) {
  const std::regex re(pattern);
  size_t n = 0;
  for (const std::string& w : gWarns) n += std::regex_search(w, re);
  return n;
}

// Takes `port` of node 1 down once `after` pieces have landed anywhere (counted in *deliveries;
// *countdown holds the fabric's hook and must outlive the traffic).
void breakPortAfter(fake::Fabric& fabric, const char* port, int after, int* deliveries,
                    std::function<void()>* countdown) {
  *countdown = [&fabric, port, after, deliveries, countdown] {
    if (++*deliveries == after) fabric.breakPort(1, port);  // under the fabric's lock
    else fabric.onDelivery = *countdown;
  };
  std::lock_guard<std::recursive_mutex> lk(fabric.mu);
  fabric.onDelivery = *countdown;
}

TEST(IbRailCollectives, AllReduceStripesOverBothPortsAndSurvivesOneGoingDownMidway) {
  FakeIb& ib = installFakeIb();
  fake::Fabric& fabric = ib.fabric;
  ncclComm_t comms[kRanks];
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess);
  const size_t n = (size_t{1} << 20) + 7;  // 4 MiB of int32 per rank

  // Both admitted ports carry the same share; the third port none.
  EXPECT_EQ(allReduceErrors(comms, n, 1), std::vector<size_t>(kRanks, 0));
  const uint64_t p0 = portBytes(fabric, "mlx5_0:1"), p1 = portBytes(fabric, "mlx5_1:1");
  EXPECT_GT(p0, n * sizeof(int32_t));
  EXPECT_NEAR(static_cast<double>(p0) / static_cast<double>(p0 + p1), 0.5, 0.001) << p0 << " / " << p1 << " bytes";
  EXPECT_EQ(portBytes(fabric, "mlx5_2:1"), 0u);

  // mlx5_1 goes down after a third of the next all-reduce's pieces have landed.
  setLogSink(&warnSink);
  int deliveries = 0;
  std::function<void()> countdown;
  breakPortAfter(fabric, "mlx5_1:1", 200, &deliveries, &countdown);
  const std::vector<size_t> bad = allReduceErrors(comms, n, 2);
  setLogSink(nullptr);
  EXPECT_EQ(deliveries, 200) << "the port was never taken down";
  EXPECT_EQ(bad, std::vector<size_t>(kRanks, 0)) << "wrong elements per rank in the all-reduce that lost a port";
  EXPECT_GE(warnsMatching("^NET/IB: QP [0-9]+ on mlx5_1:1 to peer [0-9.]+:[0-9]+ went to the error state \\(.+\\); its "
                         "work continues on mlx5_0:1$"),
            1u)
      << "no WARN names the port and the peer";

  // Afterwards everything goes over mlx5_0, still exact.
  const uint64_t dead = portBytes(fabric, "mlx5_1:1"), live = portBytes(fabric, "mlx5_0:1");
  EXPECT_EQ(allReduceErrors(comms, n, 3), std::vector<size_t>(kRanks, 0));
  EXPECT_EQ(portBytes(fabric, "mlx5_1:1"), dead);
  EXPECT_GT(portBytes(fabric, "mlx5_0:1"), live + n * sizeof(int32_t));

  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// The port that went down comes back: with ACCL_RAIL_RETRY_SEC=1 every connection takes it
// into use again within a second or so (both ends WARN), every all-reduce on the way stays
// exact, and afterwards both ports carry half of an all-reduce again.
TEST(IbRailCollectives, AllReduceTakesAPortBackIntoUseOnceItIsActiveAgain) {
  setenv("ACCL_RAIL_RETRY_SEC", "1", 1);  // read once, when the first connection is made
  FakeIb& ib = installFakeIb();
  fake::Fabric& fabric = ib.fabric;
  ncclComm_t comms[kRanks];
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess);
  const size_t n = (size_t{1} << 20) + 7;
  EXPECT_EQ(allReduceErrors(comms, n, 1), std::vector<size_t>(kRanks, 0));

  setLogSink(&warnSink);
  int deliveries = 0;
  std::function<void()> countdown;
  breakPortAfter(fabric, "mlx5_1:1", 200, &deliveries, &countdown);
  EXPECT_EQ(allReduceErrors(comms, n, 2), std::vector<size_t>(kRanks, 0));
  EXPECT_EQ(deliveries, 200) << "the port was never taken down";
  fabric.portUp(1, "mlx5_1:1");
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2000);
  for (int i = 3; std::chrono::steady_clock::now() < until; i++)
    ASSERT_EQ(allReduceErrors(comms, n, i), std::vector<size_t>(kRanks, 0)) << "all-reduce " << i;
  setLogSink(nullptr);
  EXPECT_GE(warnsMatching("^NET/IB: mlx5_1:1 to peer [0-9.]+:[0-9]+ is in use again: its port answers again on both "
                         "ends; messages stripe over mlx5_0:1, mlx5_1:1$"),
            2u)
      << "no WARN says the port is in use again";

  const uint64_t p0 = portBytes(fabric, "mlx5_0:1"), p1 = portBytes(fabric, "mlx5_1:1");
  EXPECT_EQ(allReduceErrors(comms, n, 100), std::vector<size_t>(kRanks, 0));
  const double d0 = static_cast<double>(portBytes(fabric, "mlx5_0:1") - p0);
  const double d1 = static_cast<double>(portBytes(fabric, "mlx5_1:1") - p1);
  EXPECT_NEAR(d0 / (d0 + d1), 0.5, 0.1) << d0 << " / " << d1 << " bytes on mlx5_0:1 / mlx5_1:1";

  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
