// Host streams and events (accl.h) and group semantics through the public ABI.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "accl.h"
#include "api/thread_ranks_util.h"
#include "nccl.h"

using accltest::lastError;
using accltest::runRanks;
using namespace std::chrono_literals;

TEST(HostStream, CollectivesOnPerRankStreamsRunAsynchronouslyAndSynchronize) {
  runRanks(2, [](int rank, ncclComm_t& comm) {
    cudaStream_t s;
    ASSERT_EQ(ncclHostStreamCreate(&s), ncclSuccess);
    std::vector<int> buf(1 << 18, rank + 1);
    // Rank 1 joins late, so rank 0's queued allreduce is certainly still pending when queried.
    if (rank == 1) std::this_thread::sleep_for(300ms);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, s), ncclSuccess);
    if (rank == 0) {
      EXPECT_EQ(ncclHostStreamQuery(s), ncclInProgress);
    }
    ASSERT_EQ(ncclHostStreamSynchronize(s), ncclSuccess) << lastError();
    EXPECT_EQ(ncclHostStreamQuery(s), ncclSuccess);
    EXPECT_EQ(buf.front(), 3);
    EXPECT_EQ(buf.back(), 3);
    // Several ops on one stream run in order: the second sees the first's result.
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, s), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclProd, comm, s), ncclSuccess);
    ASSERT_EQ(ncclHostStreamSynchronize(s), ncclSuccess);
    EXPECT_EQ(buf[777], 36);
    EXPECT_EQ(ncclHostStreamDestroy(s), ncclSuccess);
  });
}

TEST(HostEvent, RecordQuerySynchronizeFollowTheStream) {
  runRanks(2, [](int rank, ncclComm_t& comm) {
    cudaStream_t s;
    ncclHostEvent_t ev;
    ASSERT_EQ(ncclHostStreamCreate(&s), ncclSuccess);
    ASSERT_EQ(ncclHostEventCreate(&ev), ncclSuccess);
    EXPECT_EQ(ncclHostEventQuery(ev), ncclSuccess);  // never recorded: complete
    std::vector<float> buf(4096, 1.0f);
    if (rank == 1) std::this_thread::sleep_for(300ms);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, s), ncclSuccess);
    ASSERT_EQ(ncclHostEventRecord(ev, s), ncclSuccess);
    if (rank == 0) {
      EXPECT_EQ(ncclHostEventQuery(ev), ncclInProgress);
    }
    ASSERT_EQ(ncclHostEventSynchronize(ev), ncclSuccess);
    EXPECT_EQ(ncclHostEventQuery(ev), ncclSuccess);
    EXPECT_EQ(buf[100], 2.0f);
    EXPECT_EQ(ncclHostEventDestroy(ev), ncclSuccess);
    EXPECT_EQ(ncclHostStreamDestroy(s), ncclSuccess);
  });
}

TEST(HostEvent, StreamWaitEventOrdersWorkAcrossTwoStreams) {
  runRanks(2, [](int rank, ncclComm_t& comm) {
    cudaStream_t a, b;
    ncclHostEvent_t ev;
    ASSERT_EQ(ncclHostStreamCreate(&a), ncclSuccess);
    ASSERT_EQ(ncclHostStreamCreate(&b), ncclSuccess);
    ASSERT_EQ(ncclHostEventCreate(&ev), ncclSuccess);
    std::vector<int> x(100000, rank + 1), y(100000, 0);
    if (rank == 1) std::this_thread::sleep_for(200ms);
    ASSERT_EQ(ncclAllReduce(x.data(), x.data(), x.size(), ncclInt32, ncclSum, comm, a), ncclSuccess);  // x = 3
    ASSERT_EQ(ncclHostEventRecord(ev, a), ncclSuccess);
    ASSERT_EQ(ncclHostStreamWaitEvent(b, ev), ncclSuccess);
    // On stream b: y = allreduce(x) must see the finished first allreduce: 3 + 3.
    ASSERT_EQ(ncclAllReduce(x.data(), y.data(), x.size(), ncclInt32, ncclSum, comm, b), ncclSuccess);
    ASSERT_EQ(ncclHostStreamSynchronize(b), ncclSuccess) << lastError();
    EXPECT_EQ(ncclHostEventQuery(ev), ncclSuccess);
    EXPECT_EQ(y.front(), 6);
    EXPECT_EQ(y.back(), 6);
    EXPECT_EQ(ncclHostEventDestroy(ev), ncclSuccess);
    EXPECT_EQ(ncclHostStreamDestroy(a), ncclSuccess);
    EXPECT_EQ(ncclHostStreamDestroy(b), ncclSuccess);
  });
}

TEST(Group, NestedGroupsExecuteOnlyAtTheOutermostEnd) {
  runRanks(2, [](int rank, ncclComm_t& comm) {
    std::vector<int> send(1024, rank + 1), recv(1024, -1);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(send.data(), recv.data(), send.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    EXPECT_EQ(recv[0], -1);  // only recorded so far
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclBroadcast(send.data(), send.data(), send.size(), ncclInt32, 1, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError();
    EXPECT_EQ(recv[0], 3);
    EXPECT_EQ(recv[1023], 3);
    EXPECT_EQ(send[5], 2);
  });
}

TEST(Group, GroupEndWithoutStartIsInvalidUsage) {
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  // And the thread's group state is still usable afterwards.
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
}

// Every rank sends 3 MiB to its right neighbour and receives from its left, interleaved with
// two collectives; each rank issues its sends and receives in a different order.
TEST(Group, CollectivesAndLargeSendsRecvsInAnyOrderCompleteInOneGroup) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = (3u << 20) / sizeof(int);
  runRanks(kRanks, [&](int rank, ncclComm_t& comm) {
    const int right = (rank + 1) % kRanks, left = (rank + kRanks - 1) % kRanks;
    std::vector<int> out(kCount), in(kCount, -1), back(kCount, -1), red(1000, rank), bc(1000, rank);
    for (size_t i = 0; i < kCount; i++) out[i] = rank * 7 + int(i % 1013);
    auto sendRight = [&] { ASSERT_EQ(ncclSend(out.data(), kCount, ncclInt32, right, comm, nullptr), ncclSuccess); };
    auto recvLeft = [&] { ASSERT_EQ(ncclRecv(in.data(), kCount, ncclInt32, left, comm, nullptr), ncclSuccess); };
    auto sendLeft = [&] { ASSERT_EQ(ncclSend(out.data(), kCount, ncclInt32, left, comm, nullptr), ncclSuccess); };
    auto recvRight = [&] { ASSERT_EQ(ncclRecv(back.data(), kCount, ncclInt32, right, comm, nullptr), ncclSuccess); };
    auto allreduce = [&] {
      ASSERT_EQ(ncclAllReduce(red.data(), red.data(), red.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    };
    auto broadcast = [&] {
      ASSERT_EQ(ncclBroadcast(bc.data(), bc.data(), bc.size(), ncclInt32, 2, comm, nullptr), ncclSuccess);
    };
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    switch (rank) {  // collectives keep their relative order on all ranks; p2p may move freely
      case 0: recvLeft(); recvRight(); allreduce(); sendRight(); broadcast(); sendLeft(); break;
      case 1: sendRight(); sendLeft(); allreduce(); broadcast(); recvRight(); recvLeft(); break;
      case 2: allreduce(); recvRight(); sendLeft(); broadcast(); recvLeft(); sendRight(); break;
      default: allreduce(); broadcast(); sendLeft(); recvLeft(); sendRight(); recvRight(); break;
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError();
    for (size_t i = 0; i < kCount; i += 997) {
      ASSERT_EQ(in[i], left * 7 + int(i % 1013)) << "from left at " << i;
      ASSERT_EQ(back[i], right * 7 + int(i % 1013)) << "from right at " << i;
    }
    EXPECT_EQ(in[kCount - 1], left * 7 + int((kCount - 1) % 1013));
    EXPECT_EQ(red[999], 0 + 1 + 2 + 3);
    EXPECT_EQ(bc[0], 2);
  });
}

TEST(Group, SendAndRecvToSelfInOneGroupCopy) {
  runRanks(2, [](int rank, ncclComm_t& comm) {
    std::vector<char> a(5 << 20, char('a' + rank)), b(5 << 20, 0);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclRecv(b.data(), b.size(), ncclUint8, rank, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclSend(a.data(), a.size(), ncclUint8, rank, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError();
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0);
  });
}

TEST(Group, OneThreadDrivesAGroupOfAllReducesOverSeveralCommunicators) {
  constexpr int kRanks = 4;
  ncclComm_t comms[kRanks];
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess) << lastError();
  std::vector<std::vector<double>> buf(kRanks, std::vector<double>(1 << 17));
  for (int r = 0; r < kRanks; r++)
    for (size_t i = 0; i < buf[r].size(); i++) buf[r][i] = r + double(i % 3);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; r++)
    ASSERT_EQ(ncclAllReduce(buf[r].data(), buf[r].data(), buf[r].size(), ncclDouble, ncclSum, comms[r], nullptr),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError();
  for (int r = 0; r < kRanks; r++)
    for (size_t i = 0; i < buf[r].size(); i += 101) ASSERT_EQ(buf[r][i], 6 + 4 * double(i % 3));
  // A second grouped round, with per-comm host streams this time.
  std::vector<cudaStream_t> streams(kRanks);
  for (auto& s : streams) ASSERT_EQ(ncclHostStreamCreate(&s), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; r++)
    ASSERT_EQ(ncclAllReduce(buf[r].data(), buf[r].data(), buf[r].size(), ncclDouble, ncclMax, comms[r], streams[r]),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (auto s : streams) ASSERT_EQ(ncclHostStreamSynchronize(s), ncclSuccess);
  EXPECT_EQ(buf[3][2], 6 + 4 * 2.0);
  for (auto s : streams) EXPECT_EQ(ncclHostStreamDestroy(s), ncclSuccess);
  for (auto c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}
