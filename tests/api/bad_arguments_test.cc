// Every entry point rejects bad input with ncclInvalidArgument / ncclInvalidUsage, and
// ncclGetLastError(NULL) then names what was wrong.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "accl.h"
#include "api/thread_ranks_util.h"
#include "nccl.h"

using accltest::lastError;

// Checks the result code of `call` and that the last error text it left contains `word`. A
// marker error is raised first, so a stale message from an earlier call cannot pass the check.
#define EXPECT_REJECTED(call, code, word)                                                               \
  do {                                                                                                  \
    raiseMarkerError(word);                                                                             \
    EXPECT_EQ((call), (code)) << #call;                                                                 \
    EXPECT_NE(lastError().find(word), std::string::npos) << #call << ": last error \"" << lastError()     \
                                                         << "\" does not mention \"" << (word) << "\""; \
  } while (0)

namespace {

// Leaves a known last-error text ("ncclMemFree: ... not returned by ncclMemAlloc ...") that must
// not contain the word the next check looks for.
void raiseMarkerError(const std::string& word) {
  static int notFromMemAlloc;
  ASSERT_EQ(ncclMemFree(&notFromMemAlloc), ncclInvalidArgument);
  if (word != "ncclMemAlloc") {
    ASSERT_EQ(lastError().find(word), std::string::npos) << "marker text already contains " << word;
  }
}

}  // namespace

namespace {

const ncclDataType_t kBadType = static_cast<ncclDataType_t>(99);
const ncclRedOp_t kBadOp = static_cast<ncclRedOp_t>(99);
const cudaStream_t kCudaStream = reinterpret_cast<cudaStream_t>(0x1234);

// Two ranks of one communicator, created from one thread. Every bad call below fails during
// validation, before any communication, so one thread can drive rank 0 alone.
class BadArguments : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ncclCommInitAll(comms_, 2, nullptr), ncclSuccess) << lastError(); }
  void TearDown() override {
    for (auto c : comms_) {
      if (c) {
        EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
      }
    }
  }
  ncclComm_t comm() { return comms_[0]; }
  ncclComm_t comms_[2] = {nullptr, nullptr};
  std::vector<float> a_ = std::vector<float>(64), b_ = std::vector<float>(64);
  float* a() { return a_.data(); }
  float* b() { return b_.data(); }
};

}  // namespace

TEST(BadArgumentsNoComm, VersionIdAndMemoryEntryPointsNameTheirBadArgument) {
  EXPECT_REJECTED(ncclGetVersion(nullptr), ncclInvalidArgument, "version");
  EXPECT_REJECTED(ncclGetUniqueId(nullptr), ncclInvalidArgument, "uniqueId");
  void* p;
  EXPECT_REJECTED(ncclMemAlloc(nullptr, 16), ncclInvalidArgument, "ptr");
  EXPECT_REJECTED(ncclMemAlloc(&p, SIZE_MAX), ncclInvalidArgument, "size");
  int x;
  EXPECT_REJECTED(ncclMemFree(&x), ncclInvalidArgument, "ncclMemAlloc");
  EXPECT_NE(ncclGetErrorString(static_cast<ncclResult_t>(99)), nullptr);
  EXPECT_NE(std::string(ncclGetErrorString(static_cast<ncclResult_t>(99))).find("unknown"), std::string::npos);
  EXPECT_NE(ncclGetLastError(nullptr), nullptr);
}

TEST(BadArgumentsNoComm, InitEntryPointsRejectNullOutputsBadRanksAndBadConfigs) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c = nullptr;
  EXPECT_REJECTED(ncclCommInitRank(nullptr, 2, id, 0), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommInitRank(&c, 0, id, 0), ncclInvalidArgument, "nranks");
  EXPECT_REJECTED(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument, "rank");
  EXPECT_REJECTED(ncclCommInitRank(&c, 2, id, -1), ncclInvalidArgument, "rank");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 7;
  EXPECT_REJECTED(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument, "blocking");
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.CTAPolicy = 9;
  EXPECT_REJECTED(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument, "CTAPolicy");
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.minCTAs = 8;
  cfg.maxCTAs = 2;
  EXPECT_REJECTED(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument, "minCTAs");
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  EXPECT_REJECTED(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument, "magic");
  EXPECT_REJECTED(ncclCommInitRankScalable(&c, 1, 0, 0, &id, nullptr), ncclInvalidArgument, "nId");
  EXPECT_REJECTED(ncclCommInitRankScalable(&c, 1, 0, 1, nullptr, nullptr), ncclInvalidArgument, "commIds");
  ncclComm_t comms[2];
  EXPECT_REJECTED(ncclCommInitAll(nullptr, 2, nullptr), ncclInvalidArgument, "comms");
  EXPECT_REJECTED(ncclCommInitAll(comms, 0, nullptr), ncclInvalidArgument, "ndev");
  const int devs[2] = {0, -1};
  EXPECT_REJECTED(ncclCommInitAll(comms, 2, devs), ncclInvalidArgument, "devlist");
}

TEST(BadArgumentsNoComm, NullCommIsRejectedByEveryCommEntryPoint) {
  int i;
  ncclResult_t r;
  void* h;
  ncclWindow_t w;
  ncclComm_t out;
  ncclRedOp_t op;
  float f = 1, g;
  EXPECT_REJECTED(ncclCommFinalize(nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommRevoke(nullptr, 0), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommGetAsyncError(nullptr, &r), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommCount(nullptr, &i), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommCuDevice(nullptr, &i), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommUserRank(nullptr, &i), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommRegister(nullptr, &f, 4, &h), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommDeregister(nullptr, &f), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommWindowRegister(nullptr, &f, 4, &w, 0), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommWindowDeregister(nullptr, w), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommSplit(nullptr, 0, 0, &out, nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclCommShrink(nullptr, nullptr, 0, &out, nullptr, 0), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclRedOpCreatePreMulSum(&op, &f, ncclFloat, ncclScalarHostImmediate, nullptr),
                  ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclRedOpDestroy(static_cast<ncclRedOp_t>(5), nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclAllReduce(&f, &g, 1, ncclFloat, ncclSum, nullptr, nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclBroadcast(&f, &g, 1, ncclFloat, 0, nullptr, nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclBcast(&f, 1, ncclFloat, 0, nullptr, nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclReduce(&f, &g, 1, ncclFloat, ncclSum, 0, nullptr, nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclAllGather(&f, &g, 1, ncclFloat, nullptr, nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclReduceScatter(&f, &g, 1, ncclFloat, ncclSum, nullptr, nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclAlltoAll(&f, &g, 1, ncclFloat, nullptr, nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclGather(&f, &g, 1, ncclFloat, 0, nullptr, nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclScatter(&f, &g, 1, ncclFloat, 0, nullptr, nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclSend(&f, 1, ncclFloat, 0, nullptr, nullptr), ncclInvalidArgument, "comm");
  EXPECT_REJECTED(ncclRecv(&f, 1, ncclFloat, 0, nullptr, nullptr), ncclInvalidArgument, "comm");
}

TEST(BadArgumentsNoComm, GroupEndWithoutStartAndNullSimInfoAreRejected) {
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_REJECTED(ncclGroupSimulateEnd(nullptr), ncclInvalidArgument, "simInfo");
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  info.magic = 1;
  EXPECT_REJECTED(ncclGroupSimulateEnd(&info), ncclInvalidArgument, "magic");
}

TEST(BadArgumentsNoComm, HostStreamAndEventEntryPointsRejectForeignHandles) {
  ncclHostEvent_t badEvent = reinterpret_cast<ncclHostEvent_t>(0x5678);
  cudaStream_t s;
  ncclHostEvent_t ev;
  ASSERT_EQ(ncclHostStreamCreate(&s), ncclSuccess);
  ASSERT_EQ(ncclHostEventCreate(&ev), ncclSuccess);
  EXPECT_REJECTED(ncclHostStreamCreate(nullptr), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclHostStreamDestroy(kCudaStream), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclHostStreamSynchronize(kCudaStream), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclHostStreamQuery(nullptr), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclHostStreamWaitEvent(kCudaStream, ev), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclHostStreamWaitEvent(s, badEvent), ncclInvalidArgument, "event");
  EXPECT_REJECTED(ncclHostEventCreate(nullptr), ncclInvalidArgument, "event");
  EXPECT_REJECTED(ncclHostEventDestroy(badEvent), ncclInvalidArgument, "event");
  EXPECT_REJECTED(ncclHostEventRecord(badEvent, s), ncclInvalidArgument, "event");
  EXPECT_REJECTED(ncclHostEventRecord(ev, kCudaStream), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclHostEventQuery(badEvent), ncclInvalidArgument, "event");
  EXPECT_REJECTED(ncclHostEventSynchronize(nullptr), ncclInvalidArgument, "event");
  EXPECT_EQ(ncclHostEventDestroy(ev), ncclSuccess);
  EXPECT_EQ(ncclHostStreamDestroy(s), ncclSuccess);
  EXPECT_REJECTED(ncclHostStreamQuery(s), ncclInvalidArgument, "stream");  // destroyed
}

TEST_F(BadArguments, QueriesRejectNullOutputPointers) {
  EXPECT_REJECTED(ncclCommCount(comm(), nullptr), ncclInvalidArgument, "NULL");
  EXPECT_REJECTED(ncclCommCuDevice(comm(), nullptr), ncclInvalidArgument, "NULL");
  EXPECT_REJECTED(ncclCommUserRank(comm(), nullptr), ncclInvalidArgument, "NULL");
  EXPECT_REJECTED(ncclCommGetAsyncError(comm(), nullptr), ncclInvalidArgument, "asyncError");
  EXPECT_REJECTED(ncclCommRevoke(comm(), 3), ncclInvalidArgument, "revokeFlags");
}

TEST_F(BadArguments, SplitAndShrinkRejectBadColorsFlagsAndExcludeLists) {
  ncclComm_t out;
  EXPECT_REJECTED(ncclCommSplit(comm(), 0, 0, nullptr, nullptr), ncclInvalidArgument, "newcomm");
  EXPECT_REJECTED(ncclCommSplit(comm(), -5, 0, &out, nullptr), ncclInvalidArgument, "color");
  int bad[1] = {7}, self[1] = {0};
  EXPECT_REJECTED(ncclCommShrink(comm(), bad, 1, nullptr, nullptr, 0), ncclInvalidArgument, "newcomm");
  EXPECT_REJECTED(ncclCommShrink(comm(), bad, 1, &out, nullptr, 5), ncclInvalidArgument, "shrinkFlags");
  EXPECT_REJECTED(ncclCommShrink(comm(), bad, 1, &out, nullptr, 0), ncclInvalidArgument, "excludeRanksList");
  EXPECT_REJECTED(ncclCommShrink(comm(), nullptr, 1, &out, nullptr, 0), ncclInvalidArgument, "excludeRanksList");
  EXPECT_REJECTED(ncclCommShrink(comm(), self, 1, &out, nullptr, 0), ncclInvalidUsage, "exclude");
}

TEST_F(BadArguments, RegistrationAndRedOpCreationRejectBadArguments) {
  void* h;
  ncclWindow_t w;
  EXPECT_REJECTED(ncclCommRegister(comm(), a(), 256, nullptr), ncclInvalidArgument, "handle");
  EXPECT_REJECTED(ncclCommRegister(comm(), nullptr, 256, &h), ncclInvalidArgument, "buff");
  EXPECT_REJECTED(ncclCommDeregister(comm(), a()), ncclInvalidArgument, "handle");
  EXPECT_REJECTED(ncclCommWindowRegister(comm(), a(), 256, &w, 0x40), ncclInvalidArgument, "winFlags");
  EXPECT_REJECTED(ncclCommWindowRegister(comm(), a(), 256, nullptr, 0), ncclInvalidArgument, "handle");
  EXPECT_REJECTED(ncclCommWindowDeregister(comm(), reinterpret_cast<ncclWindow_t>(a())), ncclInvalidArgument,
                  "handle");
  ncclRedOp_t op;
  float s = 2;
  EXPECT_REJECTED(ncclRedOpCreatePreMulSum(nullptr, &s, ncclFloat, ncclScalarHostImmediate, comm()),
                  ncclInvalidArgument, "op");
  EXPECT_REJECTED(ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat, ncclScalarHostImmediate, comm()),
                  ncclInvalidArgument, "scalar");
  EXPECT_REJECTED(ncclRedOpCreatePreMulSum(&op, &s, kBadType, ncclScalarHostImmediate, comm()), ncclInvalidArgument,
                  "datatype");
  EXPECT_REJECTED(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat, static_cast<ncclScalarResidence_t>(5), comm()),
                  ncclInvalidArgument, "residence");
  EXPECT_REJECTED(ncclRedOpDestroy(ncclMax, comm()), ncclInvalidArgument, "op");
  EXPECT_REJECTED(ncclRedOpDestroy(static_cast<ncclRedOp_t>(1000), comm()), ncclInvalidArgument, "op");
}

TEST_F(BadArguments, CollectivesRejectInvalidDatatypeAndOp) {
  EXPECT_REJECTED(ncclAllReduce(a(), b(), 4, kBadType, ncclSum, comm(), nullptr), ncclInvalidArgument, "datatype");
  EXPECT_REJECTED(ncclBroadcast(a(), b(), 4, kBadType, 0, comm(), nullptr), ncclInvalidArgument, "datatype");
  EXPECT_REJECTED(ncclBcast(a(), 4, kBadType, 0, comm(), nullptr), ncclInvalidArgument, "datatype");
  EXPECT_REJECTED(ncclReduce(a(), b(), 4, kBadType, ncclSum, 0, comm(), nullptr), ncclInvalidArgument, "datatype");
  EXPECT_REJECTED(ncclAllGather(a(), b(), 4, kBadType, comm(), nullptr), ncclInvalidArgument, "datatype");
  EXPECT_REJECTED(ncclReduceScatter(a(), b(), 4, kBadType, ncclSum, comm(), nullptr), ncclInvalidArgument,
                  "datatype");
  EXPECT_REJECTED(ncclAlltoAll(a(), b(), 4, kBadType, comm(), nullptr), ncclInvalidArgument, "datatype");
  EXPECT_REJECTED(ncclGather(a(), b(), 4, kBadType, 0, comm(), nullptr), ncclInvalidArgument, "datatype");
  EXPECT_REJECTED(ncclScatter(a(), b(), 4, kBadType, 0, comm(), nullptr), ncclInvalidArgument, "datatype");
  EXPECT_REJECTED(ncclSend(a(), 4, kBadType, 1, comm(), nullptr), ncclInvalidArgument, "datatype");
  EXPECT_REJECTED(ncclRecv(a(), 4, kBadType, 1, comm(), nullptr), ncclInvalidArgument, "datatype");
  EXPECT_REJECTED(ncclAllReduce(a(), b(), 4, static_cast<ncclDataType_t>(-1), ncclSum, comm(), nullptr),
                  ncclInvalidArgument, "datatype");

  EXPECT_REJECTED(ncclAllReduce(a(), b(), 4, ncclFloat, kBadOp, comm(), nullptr), ncclInvalidArgument, "op");
  EXPECT_REJECTED(ncclReduce(a(), b(), 4, ncclFloat, kBadOp, 0, comm(), nullptr), ncclInvalidArgument, "op");
  EXPECT_REJECTED(ncclReduceScatter(a(), b(), 4, ncclFloat, kBadOp, comm(), nullptr), ncclInvalidArgument, "op");
  EXPECT_REJECTED(ncclAllReduce(a(), b(), 4, ncclFloat, static_cast<ncclRedOp_t>(-3), comm(), nullptr),
                  ncclInvalidArgument, "op");
  // A destroyed PreMulSum handle.
  ncclRedOp_t op;
  float s = 2;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat, ncclScalarHostImmediate, comm()), ncclSuccess);
  ASSERT_EQ(ncclRedOpDestroy(op, comm()), ncclSuccess);
  EXPECT_REJECTED(ncclAllReduce(a(), b(), 4, ncclFloat, op, comm(), nullptr), ncclInvalidArgument, "op");
  EXPECT_REJECTED(ncclReduce(a(), b(), 4, ncclFloat, op, 0, comm(), nullptr), ncclInvalidArgument, "op");
  EXPECT_REJECTED(ncclReduceScatter(a(), b(), 4, ncclFloat, op, comm(), nullptr), ncclInvalidArgument, "op");
  // A live handle of another communicator.
  ncclRedOp_t other;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&other, &s, ncclFloat, ncclScalarHostImmediate, comms_[1]), ncclSuccess);
  if (other != op) {  // handle values are per comm; only a value comm 0 never issued is foreign to it
    EXPECT_REJECTED(ncclAllReduce(a(), b(), 4, ncclFloat, other, comm(), nullptr), ncclInvalidArgument, "op");
  }
  EXPECT_EQ(ncclRedOpDestroy(other, comms_[1]), ncclSuccess);
}

TEST_F(BadArguments, CollectivesRejectCountsThatOverflow) {
  const size_t huge = SIZE_MAX;
  EXPECT_REJECTED(ncclAllReduce(a(), b(), huge, ncclFloat, ncclSum, comm(), nullptr), ncclInvalidArgument, "count");
  EXPECT_REJECTED(ncclBroadcast(a(), b(), huge, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "count");
  EXPECT_REJECTED(ncclBcast(a(), huge, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "count");
  EXPECT_REJECTED(ncclReduce(a(), b(), huge, ncclFloat, ncclSum, 0, comm(), nullptr), ncclInvalidArgument, "count");
  EXPECT_REJECTED(ncclAllGather(a(), b(), huge, ncclFloat, comm(), nullptr), ncclInvalidArgument, "count");
  EXPECT_REJECTED(ncclReduceScatter(a(), b(), huge, ncclFloat, ncclSum, comm(), nullptr), ncclInvalidArgument,
                  "count");
  EXPECT_REJECTED(ncclAlltoAll(a(), b(), huge, ncclFloat, comm(), nullptr), ncclInvalidArgument, "count");
  EXPECT_REJECTED(ncclGather(a(), b(), huge, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "count");
  EXPECT_REJECTED(ncclScatter(a(), b(), huge, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "count");
  EXPECT_REJECTED(ncclSend(a(), huge, ncclFloat, 1, comm(), nullptr), ncclInvalidArgument, "count");
  EXPECT_REJECTED(ncclRecv(a(), huge, ncclFloat, 1, comm(), nullptr), ncclInvalidArgument, "count");
  // Overflows only once multiplied by nranks (2): allgather's receive size.
  EXPECT_REJECTED(ncclAllGather(a(), b(), SIZE_MAX / 4 / 2 + 1, ncclFloat, comm(), nullptr), ncclInvalidArgument,
                  "count");
}

TEST_F(BadArguments, RootedCollectivesAndPointToPointRejectRootsAndPeersOutOfRange) {
  for (int bad : {-1, 2, 1000}) {
    EXPECT_REJECTED(ncclBroadcast(a(), b(), 4, ncclFloat, bad, comm(), nullptr), ncclInvalidArgument, "root");
    EXPECT_REJECTED(ncclBcast(a(), 4, ncclFloat, bad, comm(), nullptr), ncclInvalidArgument, "root");
    EXPECT_REJECTED(ncclReduce(a(), b(), 4, ncclFloat, ncclSum, bad, comm(), nullptr), ncclInvalidArgument, "root");
    EXPECT_REJECTED(ncclGather(a(), b(), 4, ncclFloat, bad, comm(), nullptr), ncclInvalidArgument, "root");
    EXPECT_REJECTED(ncclScatter(a(), b(), 4, ncclFloat, bad, comm(), nullptr), ncclInvalidArgument, "root");
    EXPECT_REJECTED(ncclSend(a(), 4, ncclFloat, bad, comm(), nullptr), ncclInvalidArgument, "peer");
    EXPECT_REJECTED(ncclRecv(a(), 4, ncclFloat, bad, comm(), nullptr), ncclInvalidArgument, "peer");
  }
}

TEST_F(BadArguments, CollectivesRejectNullBuffersWithNonZeroCount) {
  EXPECT_REJECTED(ncclAllReduce(nullptr, b(), 4, ncclFloat, ncclSum, comm(), nullptr), ncclInvalidArgument,
                  "sendbuff");
  EXPECT_REJECTED(ncclAllReduce(a(), nullptr, 4, ncclFloat, ncclSum, comm(), nullptr), ncclInvalidArgument,
                  "recvbuff");
  EXPECT_REJECTED(ncclBroadcast(nullptr, b(), 4, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "sendbuff");
  EXPECT_REJECTED(ncclBroadcast(a(), nullptr, 4, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "recvbuff");
  EXPECT_REJECTED(ncclBcast(nullptr, 4, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "buff");
  EXPECT_REJECTED(ncclReduce(nullptr, b(), 4, ncclFloat, ncclSum, 0, comm(), nullptr), ncclInvalidArgument,
                  "sendbuff");
  EXPECT_REJECTED(ncclReduce(a(), nullptr, 4, ncclFloat, ncclSum, 0, comm(), nullptr), ncclInvalidArgument,
                  "recvbuff");
  EXPECT_REJECTED(ncclAllGather(nullptr, b(), 4, ncclFloat, comm(), nullptr), ncclInvalidArgument, "sendbuff");
  EXPECT_REJECTED(ncclAllGather(a(), nullptr, 4, ncclFloat, comm(), nullptr), ncclInvalidArgument, "recvbuff");
  EXPECT_REJECTED(ncclReduceScatter(nullptr, b(), 4, ncclFloat, ncclSum, comm(), nullptr), ncclInvalidArgument,
                  "sendbuff");
  EXPECT_REJECTED(ncclReduceScatter(a(), nullptr, 4, ncclFloat, ncclSum, comm(), nullptr), ncclInvalidArgument,
                  "recvbuff");
  EXPECT_REJECTED(ncclAlltoAll(nullptr, b(), 4, ncclFloat, comm(), nullptr), ncclInvalidArgument, "sendbuff");
  EXPECT_REJECTED(ncclAlltoAll(a(), nullptr, 4, ncclFloat, comm(), nullptr), ncclInvalidArgument, "recvbuff");
  EXPECT_REJECTED(ncclGather(nullptr, b(), 4, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "sendbuff");
  EXPECT_REJECTED(ncclGather(a(), nullptr, 4, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "recvbuff");
  EXPECT_REJECTED(ncclScatter(nullptr, b(), 4, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "sendbuff");
  EXPECT_REJECTED(ncclScatter(a(), nullptr, 4, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "recvbuff");
  EXPECT_REJECTED(ncclSend(nullptr, 4, ncclFloat, 1, comm(), nullptr), ncclInvalidArgument, "sendbuff");
  EXPECT_REJECTED(ncclRecv(nullptr, 4, ncclFloat, 1, comm(), nullptr), ncclInvalidArgument, "recvbuff");
}

TEST_F(BadArguments, CollectivesRejectOverlapsThatAreNotTheInPlaceLayout) {
  std::vector<float> big(64);
  float* r = big.data();
  // Rank 0's in-place allgather input is recvbuff + 0; recvbuff + 1 overlaps but is not it.
  EXPECT_REJECTED(ncclAllGather(r + 1, r, 8, ncclFloat, comm(), nullptr), ncclInvalidArgument, "overlap");
  EXPECT_REJECTED(ncclAllGather(r + 8, r, 8, ncclFloat, comm(), nullptr), ncclInvalidArgument, "overlap");
  EXPECT_REJECTED(ncclReduceScatter(r, r + 3, 8, ncclFloat, ncclSum, comm(), nullptr), ncclInvalidArgument, "overlap");
  EXPECT_REJECTED(ncclAllReduce(r, r + 1, 8, ncclFloat, ncclSum, comm(), nullptr), ncclInvalidArgument, "overlap");
  EXPECT_REJECTED(ncclAlltoAll(r, r + 2, 8, ncclFloat, comm(), nullptr), ncclInvalidArgument, "overlap");
  EXPECT_REJECTED(ncclGather(r + 3, r, 8, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "overlap");
  EXPECT_REJECTED(ncclScatter(r, r + 5, 8, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "overlap");
  EXPECT_REJECTED(ncclBroadcast(r, r + 1, 8, ncclFloat, 0, comm(), nullptr), ncclInvalidArgument, "overlap");
  EXPECT_REJECTED(ncclReduce(r, r + 1, 8, ncclFloat, ncclSum, 0, comm(), nullptr), ncclInvalidArgument, "overlap");
}

TEST_F(BadArguments, CollectivesRejectAStreamThatIsNotAHostStream) {
  EXPECT_REJECTED(ncclAllReduce(a(), b(), 4, ncclFloat, ncclSum, comm(), kCudaStream), ncclInvalidArgument,
                  "stream");
  EXPECT_REJECTED(ncclBroadcast(a(), b(), 4, ncclFloat, 0, comm(), kCudaStream), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclBcast(a(), 4, ncclFloat, 0, comm(), kCudaStream), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclReduce(a(), b(), 4, ncclFloat, ncclSum, 0, comm(), kCudaStream), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclAllGather(a(), b(), 4, ncclFloat, comm(), kCudaStream), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclReduceScatter(a(), b(), 4, ncclFloat, ncclSum, comm(), kCudaStream), ncclInvalidArgument,
                  "stream");
  EXPECT_REJECTED(ncclAlltoAll(a(), b(), 4, ncclFloat, comm(), kCudaStream), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclGather(a(), b(), 4, ncclFloat, 0, comm(), kCudaStream), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclScatter(a(), b(), 4, ncclFloat, 0, comm(), kCudaStream), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclSend(a(), 4, ncclFloat, 1, comm(), kCudaStream), ncclInvalidArgument, "stream");
  EXPECT_REJECTED(ncclRecv(a(), 4, ncclFloat, 1, comm(), kCudaStream), ncclInvalidArgument, "stream");
}

TEST_F(BadArguments, ZeroCountIsALegalNoOpEvenWithNullBuffers) {
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 0, ncclFloat, ncclSum, comm(), nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllGather(nullptr, nullptr, 0, ncclFloat, comm(), nullptr), ncclSuccess);
  EXPECT_EQ(ncclSend(nullptr, 0, ncclFloat, 1, comm(), nullptr), ncclSuccess);
}

TEST_F(BadArguments, EveryEntryPointRejectsADestroyedOrAbortedComm) {
  for (bool abort : {false, true}) {
    ncclComm_t dead = comms_[abort ? 1 : 0];
    ASSERT_EQ(abort ? ncclCommAbort(dead) : ncclCommDestroy(dead), ncclSuccess);
    comms_[abort ? 1 : 0] = nullptr;
    // The handle is only compared against the live set, never dereferenced.
    int i;
    ncclResult_t r;
    void* h;
    ncclComm_t out;
    ncclRedOp_t op;
    float s = 1;
    const char* what = "not a live communicator";
    EXPECT_REJECTED(ncclAllReduce(a(), b(), 4, ncclFloat, ncclSum, dead, nullptr), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclBroadcast(a(), b(), 4, ncclFloat, 0, dead, nullptr), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclAllGather(a(), b(), 4, ncclFloat, dead, nullptr), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclSend(a(), 4, ncclFloat, 1, dead, nullptr), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclRecv(a(), 4, ncclFloat, 1, dead, nullptr), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclCommCount(dead, &i), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclCommUserRank(dead, &i), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclCommCuDevice(dead, &i), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclCommGetAsyncError(dead, &r), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclCommFinalize(dead), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclCommRevoke(dead, 0), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclCommRegister(dead, a(), 4, &h), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclCommSplit(dead, 0, 0, &out, nullptr), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat, ncclScalarHostImmediate, dead), ncclInvalidUsage,
                    what);
    EXPECT_REJECTED(ncclCommDestroy(dead), ncclInvalidUsage, what);
    EXPECT_REJECTED(ncclCommAbort(dead), ncclInvalidUsage, what);
  }
}

TEST_F(BadArguments, RevokedCommRefusesNewWorkAndFinalize) {
  ASSERT_EQ(ncclCommRevoke(comm(), NCCL_REVOKE_DEFAULT), ncclSuccess);
  EXPECT_REJECTED(ncclAllReduce(a(), b(), 4, ncclFloat, ncclSum, comm(), nullptr), ncclInvalidUsage, "revoked");
  EXPECT_REJECTED(ncclCommFinalize(comm()), ncclInvalidUsage, "revoked");
}
