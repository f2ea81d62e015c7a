// Collectives through the IB net module on the fake fabric: four thread ranks in one process
// with shared memory off and NCCL_NET=IB, so every byte between ranks takes the path a
// multi-host job would: net_select picks the IB module, connections are made by its
// listen/connect/accept (QpInfo over TCP), and the byte rings of net_connection.h become RDMA
// writes with immediate on the fake (tests/unit/ib_fake_verbs.h). Results are checked against
// sums computed here.
#include <gtest/gtest.h>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>
#include "nccl.h"
#include "transports/ib/ib_net.h"
#include "unit/ib_fake_verbs.h"

using namespace accl::ib;

namespace {

constexpr int kRanks = 4;

uint64_t bytesWritten(fake::Fabric& f) {
  std::lock_guard<std::recursive_mutex> lk(f.mu);
  return f.bytesWritten;
}

TEST(IbNetCollectives, AllReduceAllGatherAndSendRecvGoThroughTheIbModule) {
  // Outlives the process's IB module, which is never destroyed.
  static fake::Fabric fabric;
  IbPort port;
  port.device = "mlx5_0";
  port.active = true;
  port.ethernet = true;
  port.speedMbps = 100000;
  Gid gid{};
  gid[10] = gid[11] = 0xff;
  gid[15] = 1;
  auto host = std::make_shared<fake::Host>(fabric, 1, std::vector<IbPort>{port}, PortInfo{0, true, 4096},
                                           std::vector<GidEntry>{{3, gid, GidType::RoceV2}});
  setIbVerbsForTesting(host);
  setenv("NCCL_SHM_DISABLE", "1", 1);  // ranks share a host: without this they would use shm
  setenv("NCCL_NET", "IB", 1);

  ncclComm_t comms[kRanks];
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess);
  // Every rank has a send and a receive comm with each other rank, each its own verbs context.
  EXPECT_EQ(host->opened.load(), kRanks * 2 * (kRanks - 1));

  // All-reduce, several times the ring: int32 sums are exact.
  const size_t n = (size_t{1} << 20) + 7;
  std::vector<std::vector<int32_t>> in(kRanks, std::vector<int32_t>(n)), out(kRanks, std::vector<int32_t>(n, -1));
  for (int r = 0; r < kRanks; r++)
    for (size_t i = 0; i < n; i++) in[r][i] = static_cast<int32_t>(i % 100003) * (r + 1) + r;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; r++)
    ASSERT_EQ(ncclAllReduce(in[r].data(), out[r].data(), n, ncclInt32, ncclSum, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < kRanks; r++) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
      int32_t want = 0;
      for (int q = 0; q < kRanks; q++) want += static_cast<int32_t>(i % 100003) * (q + 1) + q;
      bad += out[r][i] != want;
    }
    EXPECT_EQ(bad, 0u) << "rank " << r << " all-reduce";
  }
  EXPECT_GE(bytesWritten(fabric), n * sizeof(int32_t)) << "the all-reduce did not cross the IB module";

  // All-gather of an odd count.
  const size_t m = 100003;
  std::vector<std::vector<int32_t>> gathered(kRanks, std::vector<int32_t>(m * kRanks, -1));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; r++)
    ASSERT_EQ(ncclAllGather(in[r].data(), gathered[r].data(), m, ncclInt32, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < kRanks; r++) {
    size_t bad = 0;
    for (int q = 0; q < kRanks; q++)
      for (size_t i = 0; i < m; i++) bad += gathered[r][q * m + i] != in[q][i];
    EXPECT_EQ(bad, 0u) << "rank " << r << " all-gather";
  }

  // Send/receive around the ring: rank r sends to r+1 and receives from r-1.
  const size_t bytes = 3 * 1000 * 1000 + 1;
  std::vector<std::vector<uint8_t>> from(kRanks, std::vector<uint8_t>(bytes)), to(kRanks, std::vector<uint8_t>(bytes));
  for (int r = 0; r < kRanks; r++)
    for (size_t i = 0; i < bytes; i++) from[r][i] = static_cast<uint8_t>(i * 7 + r * 31 + (i >> 13));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; r++) {
    ASSERT_EQ(ncclSend(from[r].data(), bytes, ncclUint8, (r + 1) % kRanks, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclRecv(to[r].data(), bytes, ncclUint8, (r + kRanks - 1) % kRanks, comms[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < kRanks; r++) EXPECT_TRUE(to[r] == from[(r + kRanks - 1) % kRanks]) << "rank " << r << " recv";

  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  std::lock_guard<std::recursive_mutex> lk(fabric.mu);
  EXPECT_EQ(fabric.rnrErrors, 0) << "a write arrived before its receive was posted";
}

}  // namespace
