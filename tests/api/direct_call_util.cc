#include "api/direct_call_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "accl.h"
#include "api/thread_ranks_util.h"
#include "nccl.h"

namespace accltest {

using namespace std::chrono_literals;

void expectNullStreamCallRunsAfterPendingHostStreamOp() {
  runRanks(2, [&](int rank, ncclComm_t& comm) {
    cudaStream_t s;
    ASSERT_EQ(ncclHostStreamCreate(&s), ncclSuccess);
    std::vector<int32_t> a(16, rank + 1), b(16, 10 * (rank + 1));
    if (rank == 1) std::this_thread::sleep_for(100ms);
    ASSERT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclInt32, ncclSum, comm, s), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(b.data(), b.data(), b.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclHostStreamSynchronize(s), ncclSuccess);
    EXPECT_EQ(a.front(), 3);
    EXPECT_EQ(a.back(), 3);
    EXPECT_EQ(b.front(), 30);
    EXPECT_EQ(b.back(), 30);
    EXPECT_EQ(ncclHostStreamDestroy(s), ncclSuccess);
  });
}

void expectPeerThatDestroysItsCommunicatorEndsTheWait(bool connectFirst) {
  runRanks(2, [&](int rank, ncclComm_t& comm) {
    std::vector<int32_t> buf(8, 1);
    if (connectFirst) {
      ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    }
    if (rank == 1) {
      std::this_thread::sleep_for(100ms);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
      comm = nullptr;
      return;
    }
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, nullptr);
    EXPECT_EQ(r, ncclRemoteError);
    EXPECT_NE(lastError().find("rank 1"), std::string::npos) << lastError();
  });
}

void expectAbortFromAnotherThreadEndsTheWait(bool connectFirst) {
  std::latch rank0Done(1);
  runRanks(2, [&](int rank, ncclComm_t& comm) {
    std::vector<int32_t> buf(8, 1);
    if (connectFirst) {
      ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    }
    if (rank == 1) {
      rank0Done.wait();  // alive, never joins
      return;
    }
    std::thread aborter([&] {
      std::this_thread::sleep_for(200ms);
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    });
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, nullptr);
    aborter.join();
    comm = nullptr;  // aborted: freed
    EXPECT_NE(r, ncclSuccess);
    EXPECT_NE(r, ncclInProgress);
    rank0Done.count_down();
  });
}

}  // namespace accltest
