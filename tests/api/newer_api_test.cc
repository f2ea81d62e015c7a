// NCCL 2.29/2.30 entry points (src/api/newer_api.cc): present so newer binaries load, and
// refusing clearly, since ACCL reports the 2.27 API.
#include <cstddef>
#include <gtest/gtest.h>
#include <nccl.h>
#include <cstdint>
#include <string>

extern "C" {
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t ncclCommMemStats(ncclComm_t comm, int stat, uint64_t* value);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, void* signalDescs, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
}

namespace {
class NewerNcclApi : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ncclCommInitAll(&comm_, 1, nullptr), ncclSuccess); }
  void TearDown() override { ncclCommDestroy(comm_); }
  void expectRefusedNaming(ncclResult_t r, const std::string& fn) {
    EXPECT_EQ(r, ncclInvalidUsage) << fn;
    EXPECT_NE(std::string(ncclGetLastError(comm_)).find(fn), std::string::npos) << ncclGetLastError(comm_);
  }
  ncclComm_t comm_ = nullptr;
};

TEST_F(NewerNcclApi, UnsupportedCallsReturnInvalidUsageAndNameThemselves) {
  ncclUniqueId id;
  ncclComm_t grown = comm_;
  uint64_t value = 7;
  void* out = &value;
  expectRefusedNaming(ncclCommGetUniqueId(comm_, &id), "ncclCommGetUniqueId");
  expectRefusedNaming(ncclCommGrow(comm_, 2, nullptr, -1, &grown, nullptr), "ncclCommGrow");
  EXPECT_EQ(grown, nullptr);
  expectRefusedNaming(ncclCommSuspend(comm_, 1), "ncclCommSuspend");
  expectRefusedNaming(ncclCommResume(comm_), "ncclCommResume");
  expectRefusedNaming(ncclCommMemStats(comm_, 3, &value), "ncclCommMemStats");
  expectRefusedNaming(ncclSignal(0, 0, 0, 0, comm_, nullptr), "ncclSignal");
  expectRefusedNaming(ncclWaitSignal(0, nullptr, comm_, nullptr), "ncclWaitSignal");
  expectRefusedNaming(ncclPutSignal(&value, 1, ncclUint64, 0, nullptr, 0, 0, 0, 0, comm_, nullptr), "ncclPutSignal");
  expectRefusedNaming(ncclGetPeerDevicePointer(nullptr, 0, 0, &out), "ncclGetPeerDevicePointer");
  EXPECT_EQ(out, nullptr);
  out = &value;
  expectRefusedNaming(ncclGetLsaMultimemDevicePointer(nullptr, 0, &out), "ncclGetLsaMultimemDevicePointer");
  EXPECT_EQ(out, nullptr);
}

TEST_F(NewerNcclApi, ANullCommIsReportedAsSuch) {
  EXPECT_EQ(ncclCommSuspend(nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommResume(nullptr), ncclInvalidArgument);
}

TEST_F(NewerNcclApi, WinGetUserPtrReturnsTheRegisteredBufferAndRejectsForeignWindows) {
  float buf[64];
  ncclWindow_t win = nullptr;
  ASSERT_EQ(ncclCommWindowRegister(comm_, buf, sizeof(buf), &win, NCCL_WIN_DEFAULT), ncclSuccess);
  void* user = nullptr;
  ASSERT_EQ(ncclWinGetUserPtr(comm_, win, &user), ncclSuccess);
  EXPECT_EQ(user, static_cast<void*>(buf));
  EXPECT_EQ(ncclWinGetUserPtr(comm_, win, nullptr), ncclInvalidArgument);
  int notAWindow = 0;
  EXPECT_EQ(ncclWinGetUserPtr(comm_, reinterpret_cast<ncclWindow_t>(&notAWindow), &user), ncclInvalidArgument);
  ASSERT_EQ(ncclCommWindowDeregister(comm_, win), ncclSuccess);
  EXPECT_EQ(ncclWinGetUserPtr(comm_, win, &user), ncclInvalidArgument);
}
}  // namespace
