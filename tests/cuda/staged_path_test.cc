// Communicators with more ranks than the collective kernel serves (kern::kMailboxRanks = 16):
// their collectives run as staged kernels on the caller's stream (comm/staged_path.h), with a
// host communicator of the same ranks moving the data. The collective matrix on 18 thread ranks
// (several per device, and one per device with one hardware queue, as Megatron-LM sets it), a
// captured all-reduce replayed with new inputs, an all-to-all of sends and receives in one
// group, and a kernel that waits for a rank that never calls, which gives up after ACCL_TIMEOUT
// and says so instead of hanging. Runs on the fake driver (label fakegpu).
#include <cstdlib>
#include <gtest/gtest.h>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "common/collective_matrix.h"
#include "common/rank_runner.h"
#include "cuda/device_matrix.h"
#include "cuda/test_driver.h"
#include "nccl.h"

namespace accl_cuda_test {
namespace {

using accl_test::runThreadRanks;

#define REQUIRE_DEVICES(d, want)                                                                   \
  std::string why_;                                                                                \
  const TestDriver* d = testDriver(&why_);                                                         \
  if (d == nullptr) GTEST_SKIP() << "SKIP: " << why_;                                              \
  {                                                                                                \
    int have_ = 0;                                                                                 \
    d->deviceGetCount(&have_);                                                                     \
    if (have_ < (want)) GTEST_SKIP() << "SKIP: needs " << (want) << " CUDA devices, this machine has " << have_; \
  }

std::string readAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

constexpr int kRanks = 18;   // more than the collective kernel's 16: the staged path
constexpr int kDevices = 6;  // three ranks per device

// Runs body(comm, rank, stream, &problems) on kRanks thread ranks, rank r on device
// r % kDevices with a stream of its own, then expects every rank's problems to be empty.
void onStagedRanks(const TestDriver& d, const std::function<void(ncclComm_t, int, CUstream, std::string*)>& body) {
  std::vector<std::string> problems(kRanks);
  std::string error;
  bool ok = runThreadRanks(
      kRanks, [](int rank) { useDevice(rank % kDevices); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d.streamCreate(&s, CU_STREAM_NON_BLOCKING));
        body(comm, rank, s, &problems[rank]);
        d.streamDestroy(s);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < kRanks; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
}

// The matrix (counts 0, 1, 7 and the prime count; every collective and op, one type per element
// size and kind; send/recv rings and all-pairs; roots 0, 1, n/2 and n-1) on n thread ranks, rank r on device r % devices.
void matrixOnStagedRanks(int n, int devices, accl_test::MatrixScope scope) {
  REQUIRE_DEVICES(d, devices);
  const std::string log = testing::TempDir() + "staged" + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
  scope.fewRoots = true;  // every root of 18 ranks would take minutes on two CPUs
  // The staged kernel only moves bytes between user memory and the box; the reductions are the
  // host communicator's, which the host matrices check with every type.
  scope.fewTypes = true;
  const auto cases = accl_test::buildMatrix(n, scope);
  std::vector<std::vector<std::string>> perRank(n);
  accl_test::Watchdog watchdog(n, 300);
  std::string error;
  bool ok = runThreadRanks(
      n, [devices](int rank) { useDevice(rank % devices); },
      [&](ncclComm_t comm, int rank) {
        DriverMatrixDevice dev(*d, devices < n, rank % devices);
        perRank[rank] = accl_test::runMatrixCases(comm, rank, n, cases, &watchdog, false, &dev);
      },
      &error);
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_DEBUG_FILE");
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(perRank[r].empty()) << "rank " << r << ":\n" << accl_test::joinedLines(perRank[r]);
  const std::string text = readAll(log);
  EXPECT_NE(text.find("collectives run as staged kernels on the caller's stream"), std::string::npos) << text;
  EXPECT_EQ(text.find("collectives use the CUDA gate model"), std::string::npos) << "the gate model served:\n" << text;
}

TEST(StagedPath, MatrixOnEighteenThreadRanksOnSixDevices) {
  setenv("FAKE_CUDA_DEVICES", "6", 1);
  matrixOnStagedRanks(18, 6, {});
}

// One rank per device and one hardware queue per device (CUDA_DEVICE_MAX_CONNECTIONS=1, as
// Megatron-LM sets it): a staged kernel waits only for its host proxy, never for work of its
// own device, so nothing hangs. The all-reduce, broadcast and reduce part of the matrix (the
// whole matrix runs above; this is about the queue, and the suite's time).
TEST(StagedPath, MatrixOnEighteenRanksOnTheirOwnDevicesWithOneHardwareQueue) {
  setenv("FAKE_CUDA_DEVICES", "18", 1);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  accl_test::MatrixScope scope;
  scope.onlyAllReduceBroadcastReduce = true;
  matrixOnStagedRanks(18, 18, scope);
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
}

// Several ranks of one process on one device wait for each other's kernels, which one hardware
// queue cannot run side by side: init refuses, naming the setting, instead of hanging later.
TEST(StagedPath, RanksSharingADeviceUnderOneHardwareQueueAreRefusedAtInit) {
  setenv("FAKE_CUDA_DEVICES", "6", 1);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  REQUIRE_DEVICES(d, 6);
  const std::string log = testing::TempDir() + "staged_mc1_" + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
  constexpr int n = 18;
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  std::vector<ncclResult_t> got(n, ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    threads.emplace_back([&, r] {
      useDevice(r % 6);
      ncclComm_t comm = nullptr;
      got[r] = ncclCommInitRank(&comm, n, id, r);
      if (comm) ncclCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_FILE");
  for (int r = 0; r < n; r++) EXPECT_EQ(ncclInvalidUsage, got[r]) << "rank " << r;
  const std::string text = readAll(log);
  EXPECT_NE(text.find("CUDA_DEVICE_MAX_CONNECTIONS=1 gives the device's streams only 1 hardware queue"),
            std::string::npos)
      << text;
}

// A captured all-reduce (and an all-gather) replayed three times with new inputs: the staged
// proxy keeps the captured calls' descriptions for every replay.
TEST(StagedPath, CapturedCollectivesReplayWithNewInputsEveryTime) {
  setenv("FAKE_CUDA_DEVICES", "6", 1);
  REQUIRE_DEVICES(d, kDevices);
  constexpr int n = kRanks;
  const size_t count = 300001;  // several rounds of the all-gather's staging
  std::barrier<> meet(n);
  onStagedRanks(*d, [&](ncclComm_t comm, int rank, CUstream s, std::string* problems) {
      CUdeviceptr in = 0, out = 0, gathered = 0;
      ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&in, count * 4));
      ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&out, count * 4));
      ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&gathered, count * 4 * n));
      // A global-mode capture forbids allocations on every thread: all ranks allocate first.
      meet.arrive_and_wait();
      ASSERT_EQ(CUDA_SUCCESS, d->streamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
      auto st = reinterpret_cast<cudaStream_t>(s);
      ASSERT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(in), reinterpret_cast<void*>(out), count,
                                           ncclInt32, ncclSum, comm, st));
      ASSERT_EQ(ncclSuccess,
                ncclAllGather(reinterpret_cast<void*>(in), reinterpret_cast<void*>(gathered), count, ncclInt32, comm, st));
      CUgraph graph = nullptr;
      ASSERT_EQ(CUDA_SUCCESS, d->streamEndCapture(s, &graph));
      meet.arrive_and_wait();  // and no rank copies synchronously while another still captures
      CUgraphExec exec = nullptr;
      ASSERT_EQ(CUDA_SUCCESS, d->graphInstantiate(&exec, graph, 0));
      auto value = [](int r, size_t i, int replay) { return static_cast<int32_t>(i % 1000 + r * 7 + replay * 100); };
      for (int replay = 0; replay < 3; replay++) {
        std::vector<int32_t> host(count);
        for (size_t i = 0; i < count; i++) host[i] = value(rank, i, replay);
        ASSERT_EQ(CUDA_SUCCESS, d->memcpyHtoD(in, host.data(), count * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->graphLaunch(exec, s));
        ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
        d->memcpyDtoH(host.data(), out, count * 4);
        for (size_t i = 0; i < count; i++) {
          int32_t want = 0;
          for (int r = 0; r < n; r++) want += value(r, i, replay);
          if (host[i] != want) {
            *problems += "replay " + std::to_string(replay) + ": all-reduce element " + std::to_string(i) +
                            " is " + std::to_string(host[i]) + ", not " + std::to_string(want) + "\n";
            break;
          }
        }
        std::vector<int32_t> all(count * n);
        d->memcpyDtoH(all.data(), gathered, count * 4 * n);
        for (size_t k = 0; k < all.size(); k++)
          if (all[k] != value(static_cast<int>(k / count), k % count, replay)) {
            *problems += "replay " + std::to_string(replay) + ": all-gather element " + std::to_string(k) +
                            " is " + std::to_string(all[k]) + "\n";
            break;
          }
      }
      d->graphExecDestroy(exec);
      d->graphDestroy(graph);
      d->memFree(in);
      d->memFree(out);
      d->memFree(gathered);
  });
}

// A rank that never makes its call: with ACCL_TIMEOUT=2 the others' staged kernels give up
// (their streams move on), their communicators fail with a WARN that names the wait, and
// ncclCommDestroy returns on every rank, the one that never called included.
TEST(StagedPath, ARankThatNeverCallsMakesTheOthersGiveUpAfterTheTimeout) {
  setenv("FAKE_CUDA_DEVICES", "6", 1);
  REQUIRE_DEVICES(d, kDevices);
  const std::string log = testing::TempDir() + "staged_timeout_" + std::to_string(getpid()) + ".log";
  setenv("ACCL_TIMEOUT", "2", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
  constexpr int absent = 11;
  std::barrier<> meet(kRanks);
  onStagedRanks(*d, [&](ncclComm_t comm, int rank, CUstream s, std::string* problems) {
      CUdeviceptr buf = 0;
      ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&buf, 4096 * 4));
      if (rank != absent) {
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf), reinterpret_cast<void*>(buf), 4096,
                                             ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(s)));
        EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));  // returns: the kernel gave up
        const auto waited = std::chrono::steady_clock::now() - t0;
        if (waited > std::chrono::seconds(30))
          *problems = "the stream took " +
                      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(waited).count()) + " s";
        ncclResult_t async = ncclSuccess;
        for (int i = 0; i < 100 && async == ncclSuccess; i++) {
          ncclCommGetAsyncError(comm, &async);
          if (async == ncclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (async == ncclSuccess) *problems += " the communicator did not fail";
      }
      meet.arrive_and_wait();  // the absent rank stays until the others have given up
      d->memFree(buf);
  });
  unsetenv("ACCL_TIMEOUT");
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_FILE");
  const std::string text = readAll(log);
  EXPECT_NE(text.find("ACCL_TIMEOUT"), std::string::npos) << text;
}

}  // namespace
}  // namespace accl_cuda_test
