// Communicator lifecycle through the public ABI: versions, ids, init flavours (threads, InitAll,
// configs from older headers, non-blocking), split, shrink, finalize/destroy, queries, reduction
// operators, memory and registration.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <latch>
#include <numeric>
#include <vector>

#include "accl.h"
#include "api/thread_ranks_util.h"
#include "nccl.h"

using accltest::lastError;
using accltest::runRanks;
using accltest::runThreads;

namespace {

// Sum over ranks of `value(rank)`, checked with an int allreduce on `comm`.
void expectAllReduceSum(ncclComm_t comm, int mine, int want) {
  std::vector<int> buf(1000, mine);
  ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess)
      << lastError();
  for (int v : buf) ASSERT_EQ(v, want);
}

// A struct of `bytes` bytes placed so its last byte is the last byte before an inaccessible
// page: the library reading past the caller's `size` crashes the test.
struct GuardedBytes {
  explicit GuardedBytes(size_t bytes) {
    page = sysconf(_SC_PAGESIZE);
    base = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    mprotect(base + page, page, PROT_NONE);
    ptr = base + page - bytes;
  }
  ~GuardedBytes() { munmap(base, 2 * page); }
  size_t page;
  char* base;
  char* ptr;
};

// Initializes `nranks` thread ranks with the same (caller-owned) config pointer and checks a sum.
void initWithConfigAndAllReduce(int nranks, ncclConfig_t* config) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  runThreads(nranks, [&](int rank) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRankConfig(&comm, nranks, id, rank, config), ncclSuccess) << lastError();
    expectAllReduceSum(comm, rank, nranks * (nranks - 1) / 2);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

}  // namespace

TEST(Version, GetVersionReportsTheHeaderVersionCode) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_EQ(v, 22707);
  EXPECT_NE(std::string(ncclAcclVersionString()).find("ACCL"), std::string::npos);
}

TEST(Init, UniqueIdSharedByFourThreadsGivesFourRanksThatAllReduce) {
  runRanks(4, [](int rank, ncclComm_t& comm) {
    int n = 0, me = -1, dev = -2;
    ASSERT_EQ(ncclCommCount(comm, &n), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(comm, &me), ncclSuccess);
    ASSERT_EQ(ncclCommCuDevice(comm, &dev), ncclSuccess);
    EXPECT_EQ(n, 4);
    EXPECT_EQ(me, rank);
    EXPECT_GE(dev, 0);
    expectAllReduceSum(comm, rank + 1, 10);
  });
}

TEST(Init, UniqueIdSurvivesARawByteCopy) {
  ncclUniqueId id, copy;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::memcpy(&copy, &id, sizeof(id));
  runThreads(2, [&](int rank) {
    ncclComm_t comm;
    ASSERT_EQ(ncclCommInitRank(&comm, 2, rank == 0 ? id : copy, rank), ncclSuccess) << lastError();
    expectAllReduceSum(comm, 1, 2);
    ncclCommDestroy(comm);
  });
}

TEST(Init, InitAllWithDuplicateDeviceIndicesSharesDevicesAndWorks) {
  const int devs[4] = {0, 0, 1, 1};
  ncclComm_t comms[4];
  ASSERT_EQ(ncclCommInitAll(comms, 4, devs), ncclSuccess) << lastError();
  for (int r = 0; r < 4; r++) {
    int n = 0, me = -1, dev = -1;
    EXPECT_EQ(ncclCommCount(comms[r], &n), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(comms[r], &me), ncclSuccess);
    EXPECT_EQ(ncclCommCuDevice(comms[r], &dev), ncclSuccess);
    EXPECT_EQ(n, 4);
    EXPECT_EQ(me, r);
    EXPECT_EQ(dev, devs[r]);
  }
  std::vector<std::vector<float>> buf(4, std::vector<float>(333));
  for (int r = 0; r < 4; r++) std::fill(buf[r].begin(), buf[r].end(), float(r));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 4; r++)
    ASSERT_EQ(ncclAllReduce(buf[r].data(), buf[r].data(), 333, ncclFloat, ncclSum, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << lastError();
  for (int r = 0; r < 4; r++)
    for (float v : buf[r]) ASSERT_EQ(v, 6.0f);
  for (int r = 0; r < 4; r++) EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
}

TEST(Init, InitAllWithNullDevlistUsesDeviceIndexEqualToRank) {
  ncclComm_t comms[3];
  ASSERT_EQ(ncclCommInitAll(comms, 3, nullptr), ncclSuccess) << lastError();
  for (int r = 0; r < 3; r++) {
    int dev = -1;
    EXPECT_EQ(ncclCommCuDevice(comms[r], &dev), ncclSuccess);
    EXPECT_EQ(dev, r);
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

// The NCCL 2.14 header's ncclConfig_t ended at `blocking` (sizeof 24).
TEST(Config, StructFromA214HeaderEndingAtBlockingIsAcceptedWithoutReadingPastItsSize) {
  struct Config214 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
  };
  GuardedBytes mem(sizeof(Config214));
  auto* c = new (mem.ptr) Config214{sizeof(Config214), 0xcafebeef, NCCL_VERSION(2, 14, 3), 1};
  initWithConfigAndAllReduce(2, reinterpret_cast<ncclConfig_t*>(c));
}

// The NCCL 2.17 header's ncclConfig_t ended at `netName` (sizeof 40).
TEST(Config, StructFromA217HeaderEndingAtNetNameIsAcceptedWithoutReadingPastItsSize) {
  struct Config217 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char* netName;
  };
  GuardedBytes mem(sizeof(Config217));
  auto* c = new (mem.ptr)
      Config217{sizeof(Config217), 0xcafebeef, NCCL_VERSION(2, 17, 1), 1, 2, 1, 8, NCCL_CONFIG_UNDEF_PTR};
  initWithConfigAndAllReduce(3, reinterpret_cast<ncclConfig_t*>(c));
}

TEST(Config, FieldsNewerThanTheCallersVersionAreIgnoredEvenIfInvalid) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.version = NCCL_VERSION(2, 18, 0);
  c.CTAPolicy = 77;             // 2.27 field: distrusted, so not validated
  c.nChannelsPerNetPeer = -3;   // 2.28 field
  initWithConfigAndAllReduce(2, &c);
}

TEST(Config, StructFromANewerHeaderWithUnknownTrailingFieldsIsAccepted) {
  struct Bigger {
    ncclConfig_t base;
    int futureField[6];
  } big;
  big.base = NCCL_CONFIG_INITIALIZER;
  big.base.size = sizeof(Bigger);
  big.base.version = NCCL_VERSION(2, 30, 0);
  std::fill(std::begin(big.futureField), std::end(big.futureField), 0x7777);
  initWithConfigAndAllReduce(2, &big.base);
}

TEST(Config, BadMagicIsRejectedAsInvalidArgumentNamingTheInitializer) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.magic = 0x12345678;
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &c), ncclInvalidArgument);
  EXPECT_NE(lastError().find("magic"), std::string::npos) << lastError();
}

TEST(Config, CallerStructIsNotWrittenBack) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  ncclConfig_t before = c;
  initWithConfigAndAllReduce(2, &c);
  EXPECT_EQ(std::memcmp(&c, &before, sizeof(c)), 0);
}

TEST(Init, NonBlockingInitReturnsInProgressThenAsyncErrorPollsToSuccess) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  runThreads(3, [&](int rank) {
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    c.blocking = 0;
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRankConfig(&comm, 3, id, rank, &c), ncclInProgress) << lastError();
    ASSERT_NE(comm, nullptr);
    ncclResult_t state = ncclInProgress;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline)
      ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    ASSERT_EQ(state, ncclSuccess);
    int v = rank;
    ncclResult_t r = ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, nullptr);
    ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << r;
    do ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    while (state == ncclInProgress);
    EXPECT_EQ(state, ncclSuccess);
    EXPECT_EQ(v, 3);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

TEST(Split, ColorsGroupRanksKeysReorderThemAndNoColorGivesNull) {
  runRanks(4, [](int rank, ncclComm_t& comm) {
    // Ranks 0 and 2 form colour 0 ordered by descending old rank; rank 1 is alone; rank 3 opts out.
    const int color = rank == 3 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    ncclComm_t sub = reinterpret_cast<ncclComm_t>(0x1);
    ASSERT_EQ(ncclCommSplit(comm, color, -rank, &sub, nullptr), ncclSuccess) << lastError();
    if (rank == 3) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    int n = 0, me = -1;
    ASSERT_EQ(ncclCommCount(sub, &n), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(sub, &me), ncclSuccess);
    if (rank == 1) {
      EXPECT_EQ(n, 1);
      EXPECT_EQ(me, 0);
    } else {
      EXPECT_EQ(n, 2);
      EXPECT_EQ(me, rank == 2 ? 0 : 1);
      // New rank 0 (old rank 2) broadcasts its old rank.
      int v = rank;
      ASSERT_EQ(ncclBroadcast(&v, &v, 1, ncclInt32, 0, sub, nullptr), ncclSuccess) << lastError();
      EXPECT_EQ(v, 2);
      expectAllReduceSum(sub, rank, 2);
    }
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

TEST(Split, EqualKeysKeepTheParentOrder) {
  runRanks(3, [](int rank, ncclComm_t& comm) {
    ncclComm_t sub = nullptr;
    ASSERT_EQ(ncclCommSplit(comm, 5, 0, &sub, nullptr), ncclSuccess) << lastError();
    int me = -1;
    ASSERT_EQ(ncclCommUserRank(sub, &me), ncclSuccess);
    EXPECT_EQ(me, rank);
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

TEST(Shrink, SurvivorsAreRenumberedAndRunACollectiveWithoutTheExcludedRank) {
  std::latch survivorsDone(3);
  runRanks(4, [&](int rank, ncclComm_t& comm) {
    if (rank == 2) {  // the excluded rank never calls ncclCommShrink
      survivorsDone.wait();
      return;
    }
    int exclude[1] = {2};
    ncclComm_t small = nullptr;
    ASSERT_EQ(ncclCommShrink(comm, exclude, 1, &small, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess) << lastError();
    int n = 0, me = -1;
    EXPECT_EQ(ncclCommCount(small, &n), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(small, &me), ncclSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(me, rank < 2 ? rank : rank - 1);
    expectAllReduceSum(small, rank, 0 + 1 + 3);
    EXPECT_EQ(ncclCommDestroy(small), ncclSuccess);
    survivorsDone.count_down();
  });
}

TEST(Shrink, SurvivorsShrinkAwayARankThatAlreadyAborted) {
  std::latch aborted(4);
  runRanks(4, [&](int rank, ncclComm_t& comm) {
    if (rank == 1) {
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      comm = nullptr;
      aborted.count_down();
      return;
    }
    aborted.arrive_and_wait();  // wait until rank 1 is gone
    int exclude[1] = {1};
    ncclComm_t small = nullptr;
    ASSERT_EQ(ncclCommShrink(comm, exclude, 1, &small, nullptr, NCCL_SHRINK_ABORT), ncclSuccess) << lastError();
    int me = -1;
    EXPECT_EQ(ncclCommUserRank(small, &me), ncclSuccess);
    EXPECT_EQ(me, rank == 0 ? 0 : rank - 1);
    expectAllReduceSum(small, 1, 3);
    EXPECT_EQ(ncclCommDestroy(small), ncclSuccess);
  });
}

TEST(Lifecycle, FinalizeFlushesThenDestroyFreesAndLaterUseIsInvalidUsage) {
  runRanks(2, [](int rank, ncclComm_t& comm) {
    cudaStream_t s;
    ASSERT_EQ(ncclHostStreamCreate(&s), ncclSuccess);
    std::vector<double> buf(1 << 16, rank + 1.0);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclDouble, ncclSum, comm, s), ncclSuccess);
    ASSERT_EQ(ncclCommFinalize(comm), ncclSuccess) << lastError();
    // Finalize waited for the queued allreduce's data movement (the stream item itself may
    // retire a moment later, so the stream is synchronized rather than queried).
    EXPECT_EQ(buf[12345], 3.0);
    EXPECT_EQ(ncclHostStreamSynchronize(s), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), 1, ncclDouble, ncclSum, comm, nullptr), ncclInvalidUsage);
    EXPECT_NE(lastError().find("finalized"), std::string::npos) << lastError();
    EXPECT_EQ(ncclCommFinalize(comm), ncclInvalidUsage);
    ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
    int n;
    EXPECT_EQ(ncclCommCount(comm, &n), ncclInvalidUsage);  // the handle is no longer live
    comm = nullptr;
    EXPECT_EQ(ncclHostStreamDestroy(s), ncclSuccess);
  });
}

TEST(Lifecycle, DestroyOfNullCommIsANoOp) { EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess); }

TEST(RedOp, DestroyedHandleIsRejectedAndANewOpMayReuseItsValue) {
  runRanks(2, [](int rank, ncclComm_t& comm) {
    float two = 2.0f, three = 3.0f;
    ncclRedOp_t a, b;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&a, &two, ncclFloat, ncclScalarHostImmediate, comm), ncclSuccess);
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&b, &three, ncclFloat, ncclScalarHostImmediate, comm), ncclSuccess);
    EXPECT_GE(int(a), int(ncclNumOps));
    EXPECT_NE(a, b);
    ASSERT_EQ(ncclRedOpDestroy(a, comm), ncclSuccess);
    float v = rank + 1.0f;
    EXPECT_EQ(ncclAllReduce(&v, &v, 1, ncclFloat, a, comm, nullptr), ncclInvalidArgument);
    EXPECT_NE(lastError().find("op"), std::string::npos) << lastError();
    EXPECT_EQ(ncclRedOpDestroy(a, comm), ncclInvalidArgument);
    ncclRedOp_t c;
    float ten = 10.0f;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&c, &ten, ncclFloat, ncclScalarHostImmediate, comm), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(&v, &v, 1, ncclFloat, c, comm, nullptr), ncclSuccess) << lastError();
    EXPECT_EQ(v, 10.0f * (1 + 2));  // the new op's scalar, not the destroyed one's
    v = rank + 1.0f;
    ASSERT_EQ(ncclAllReduce(&v, &v, 1, ncclFloat, b, comm, nullptr), ncclSuccess);
    EXPECT_EQ(v, 3.0f * (1 + 2));
    // A handle belongs to its datatype.
    double d = 1;
    EXPECT_EQ(ncclAllReduce(&d, &d, 1, ncclDouble, b, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclRedOpDestroy(b, comm), ncclSuccess);
    EXPECT_EQ(ncclRedOpDestroy(c, comm), ncclSuccess);
    EXPECT_EQ(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument);
  });
}

TEST(RedOp, DeviceResidentScalarIsReadWhenTheCollectiveRuns) {
  runRanks(2, [](int rank, ncclComm_t& comm) {
    float* scalar = nullptr;
    ASSERT_EQ(ncclMemAlloc(reinterpret_cast<void**>(&scalar), sizeof(float)), ncclSuccess);
    *scalar = 1.0f;
    ncclRedOp_t op;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, scalar, ncclFloat, ncclScalarDevice, comm), ncclSuccess);
    *scalar = 4.0f;  // changed after creation: a device scalar is read at run time
    float v = rank + 1.0f;
    ASSERT_EQ(ncclAllReduce(&v, &v, 1, ncclFloat, op, comm, nullptr), ncclSuccess);
    EXPECT_EQ(v, 12.0f);
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
    EXPECT_EQ(ncclMemFree(scalar), ncclSuccess);
  });
}

TEST(Memory, MemAllocGivesWritableAlignedMemoryAndBadFreesAreRejected) {
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 1000), ncclSuccess);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  std::memset(p, 0xab, 1000);
  void* q = nullptr;
  ASSERT_EQ(ncclMemAlloc(&q, 0), ncclSuccess);
  EXPECT_EQ(ncclMemFree(q), ncclSuccess);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  EXPECT_EQ(ncclMemFree(p), ncclInvalidArgument);  // double free
  int onStack = 0;
  EXPECT_EQ(ncclMemFree(&onStack), ncclInvalidArgument);
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);
}

TEST(Memory, RegisterDeregisterRoundTripsAndForeignHandlesAreRejected) {
  ncclComm_t comms[2];
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  std::vector<char> buf(1 << 20);
  void* h = nullptr;
  ASSERT_EQ(ncclCommRegister(comms[0], buf.data(), buf.size(), &h), ncclSuccess);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(ncclCommDeregister(comms[1], h), ncclInvalidArgument);  // not comm 1's
  EXPECT_EQ(ncclCommDeregister(comms[0], h), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(comms[0], h), ncclInvalidArgument);  // already gone
  ncclWindow_t w0 = nullptr, w1 = nullptr;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommWindowRegister(comms[0], buf.data(), 4096, &w0, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  EXPECT_EQ(ncclCommWindowRegister(comms[1], buf.data() + 4096, 4096, &w1, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(ncclCommWindowDeregister(comms[0], w0), ncclSuccess);
  EXPECT_EQ(ncclCommWindowDeregister(comms[1], w1), ncclSuccess);
  EXPECT_EQ(ncclCommWindowDeregister(comms[1], w1), ncclInvalidArgument);
  for (auto c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// A root that sends a small broadcast finishes at once (the data fits in the receiver's ring) and
// may destroy its communicator before the receiver first touches that pair. The receiver must
// still get the data: it lies in the receiver's own shared memory, and the root's is gone.
TEST(Lifecycle, ASenderThatDestroysBeforeTheReceiverConnectsStillDeliversItsData) {
  accltest::runRanks(2, [](int rank, ncclComm_t& comm) {
    std::vector<int> buf(1024, rank == 1 ? 42 : -1);
    if (rank == 0) usleep(300 * 1000);  // rank 1 has destroyed its communicator by now
    ASSERT_EQ(ncclBroadcast(buf.data(), buf.data(), buf.size(), ncclInt32, 1, comm, nullptr), ncclSuccess)
        << accltest::lastError();
    EXPECT_EQ(buf.front(), 42);
    EXPECT_EQ(buf.back(), 42);
  });
}
