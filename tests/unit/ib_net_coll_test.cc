// Collectives through the IB net module on the fake fabric: four thread ranks in one process
// with shared memory off and NCCL_NET=IB, so every byte between ranks takes the path a
// multi-host job would: net_select picks the IB module, connections are made by its
// listen/connect/accept (QpInfo over TCP), and the byte rings of net_connection.h become RDMA
// writes with immediate on the fake (tests/unit/ib_fake_verbs.h). Results are checked against
// sums computed here. Also: without NCCL_NET a usable IB port is chosen by default.
#include <gtest/gtest.h>
#include <cstdint>
#include <cstdlib>
#include <memory>
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

// The fake fabric and the host the process's IB module sees, installed once per process (the
// module is made at the first communicator and never replaced). Both outlive it.
struct FakeIb {
  fake::Fabric fabric;
  std::shared_ptr<fake::Host> host;
};
FakeIb& installFakeIb() {
  static FakeIb& ib = [] () -> FakeIb& {
    static FakeIb f;
    f.host = fake::roceHost(f.fabric, {"mlx5_0"});
    setIbVerbsForTesting(f.host);
    return f;
  }();
  setenv("NCCL_SHM_DISABLE", "1", 1);  // ranks share a host: without this they would use shm
  setenv("NCCL_NET_PLUGIN", "none", 1);
  return ib;
}

// A two-rank all-reduce whose result is checked; true when it was right.
bool smallAllReduceIsRight(ncclComm_t* comms) {
  const size_t n = 4099;
  std::vector<std::vector<int32_t>> in(2, std::vector<int32_t>(n)), out(2, std::vector<int32_t>(n, -1));
  for (int r = 0; r < 2; r++)
    for (size_t i = 0; i < n; i++) in[r][i] = static_cast<int32_t>(i) * (r + 2);
  if (ncclGroupStart() != ncclSuccess) return false;
  for (int r = 0; r < 2; r++)
    if (ncclAllReduce(in[r].data(), out[r].data(), n, ncclInt32, ncclSum, comms[r], nullptr) != ncclSuccess) return false;
  if (ncclGroupEnd() != ncclSuccess) return false;
  for (int r = 0; r < 2; r++)
    for (size_t i = 0; i < n; i++)
      if (out[r][i] != static_cast<int32_t>(i) * 5) return false;
  return true;
}

// NCCL's order without NCCL_NET: (no plugin here, so) IB, since a usable port exists.
// NCCL_NET=Socket still gets sockets.
TEST(IbNetCollectives, WithoutNcclNetAUsableIbPortIsChosenAndNcclNetSocketStillGetsSockets) {
  FakeIb& ib = installFakeIb();
  unsetenv("NCCL_NET");
  ncclComm_t comms[2];
  int before = ib.host->opened.load();
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  EXPECT_EQ(ib.host->opened.load() - before, 4) << "2 ranks x (send + receive comm) through IB";
  EXPECT_TRUE(smallAllReduceIsRight(comms));
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);

  setenv("NCCL_NET", "Socket", 1);
  before = ib.host->opened.load();
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  EXPECT_EQ(ib.host->opened.load(), before) << "NCCL_NET=Socket went through IB";
  EXPECT_TRUE(smallAllReduceIsRight(comms));
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  unsetenv("NCCL_NET");
}

TEST(IbNetCollectives, AllReduceAllGatherAndSendRecvGoThroughTheIbModule) {
  FakeIb& ib = installFakeIb();
  fake::Fabric& fabric = ib.fabric;
  auto& host = ib.host;
  setenv("NCCL_NET", "IB", 1);
  const int openedBefore = host->opened.load();
  const uint64_t writtenBefore = bytesWritten(fabric);

  ncclComm_t comms[kRanks];
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess);
  // Every rank has a send and a receive comm with each other rank, each its own verbs context.
  EXPECT_EQ(host->opened.load() - openedBefore, kRanks * 2 * (kRanks - 1));

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
  EXPECT_GE(bytesWritten(fabric) - writtenBefore, n * sizeof(int32_t)) << "the all-reduce did not cross the IB module";

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
  unsetenv("NCCL_NET");
  std::lock_guard<std::recursive_mutex> lk(fabric.mu);
  EXPECT_EQ(fabric.rnrErrors, 0) << "a write arrived before its receive was posted";
}

}  // namespace
