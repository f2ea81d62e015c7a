// The HIP backend (ACCL_BACKEND=hip) through the public API on the fake driver's HIP face
// (tests/fake_cuda/hip_face.cc): the collective matrix on HIP device buffers (ranks as threads on
// one device and on their own devices, as processes through HIP IPC, and over sockets through the
// network proxy), graph capture and replay, and abort with work queued. Results are checked
// against the matrix's own host reference (tests/common/collective_matrix.h). The kernels are
// the emulated host build of kernels/device_kernels.h, looked up by the names the embedded HIP
// bundle carries; nothing here ran on an AMD GPU.
#include <cstdlib>
#include <gtest/gtest.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>
#include "accl.h"
#include "common/collective_matrix.h"
#include "common/rank_runner.h"
#include "common/child_logs.h"
#include "common/text_file.h"
#include "fake_cuda/fake_cuda_test_api.h"
#include "hip/fake_hip_api.h"
#include "hip/hip_matrix_device.h"
#include "nccl.h"

namespace accl_hip_test {
namespace {

using accl_test::runThreadRanks;

int hipDevices() {
  int n = 0;
  return hipGetDeviceCount(&n) == hipSuccess ? n : 0;
}

// The HIP backend was chosen (the one INFO line of backend_choice.cc), or the test is skipped
// with the reason: the HIP bundle is missing from this build (clang-19 absent).
#define REQUIRE_HIP_BACKEND()                                                               \
  do {                                                                                      \
    const std::string why_ = accl_test_backendWhy();                                        \
    if (why_.find("no HIP kernels") != std::string::npos) GTEST_SKIP() << "SKIP: " << why_; \
    ASSERT_EQ(why_.rfind("HIP backend (", 0), 0u) << why_;                                  \
  } while (0)

// What the process's backend choice said: a communicator of one rank makes the choice.
std::string accl_test_backendWhy() {
  static std::string why = [] {
    // ncclCommInitAll of one rank triggers the choice; its line is read back from the log file.
    const std::string path = testing::TempDir() + "accl_hip_choice_" + std::to_string(getpid()) + ".log";
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
    setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
    ncclComm_t comm = nullptr;
    int dev = 0;
    ncclResult_t r = ncclCommInitAll(&comm, 1, &dev);
    if (r == ncclSuccess) ncclCommDestroy(comm);
    unsetenv("NCCL_DEBUG");
    unsetenv("NCCL_DEBUG_SUBSYS");
    unsetenv("NCCL_DEBUG_FILE");
    const std::string log = accl_test::readFile(path);
    unlink(path.c_str());
    for (const char* key : {"HIP backend (", "host backend: "}) {
      const size_t at = log.find(key);
      if (at != std::string::npos) return log.substr(at, log.find('\n', at) - at);
    }
    return "no backend line in the log: " + log;
  }();
  return why;
}

// The whole matrix on n thread ranks of this process, on device 0 or each on its own device.
void matrixOnThreadRanks(int n, bool ownDevices) {
  REQUIRE_HIP_BACKEND();
  if (ownDevices && hipDevices() < n)
    GTEST_SKIP() << "SKIP: needs " << n << " HIP devices, the fake has " << hipDevices();
  accl_test::MatrixScope scope;
  const auto cases = accl_test::buildMatrix(n, scope);
  std::vector<std::vector<std::string>> perRank(n);
  accl_test::Watchdog watchdog(n, 240);
  std::string error;
  bool ok = runThreadRanks(
      n, [&](int rank) { hipSetDevice(ownDevices ? rank : 0); },
      [&](ncclComm_t comm, int rank) {
        int cur = -1;
        hipGetDevice(&cur);
        EXPECT_EQ(cur, ownDevices ? rank : 0) << "ncclCommInitRank changed the calling thread's HIP device";
        HipMatrixDevice dev(!ownDevices && n > 1, ownDevices ? rank : 0);
        perRank[rank] = accl_test::runMatrixCases(comm, rank, n, cases, &watchdog, false, &dev);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(perRank[r].empty()) << accl_test::joinedLines(perRank[r]);
}

// The backend says what it is, loads the HIP bundle (the fake refuses any other image), gives
// ncclMemAlloc HIP device memory, and allocates every host flag that kernels poll as coherent
// memory and the mailboxes as fine-grained device memory.
TEST(HipBackend, IsChosenByAcclBackendHipAndLoadsTheOffloadBundle) {
  REQUIRE_HIP_BACKEND();
  const std::string why = accl_test_backendWhy();
  const std::string major = std::to_string(fakeHipRocmMajor());
  // The fake says ROCm 6.2 (or 5.2 under FAKE_HIP_ROCM_MAJOR=5).
  EXPECT_EQ(why, "HIP backend (" + std::to_string(hipDevices()) + " device(s), libamdhip64.so.6, ROCm " + major +
                     ".2, ACCL_BACKEND=hip)");
  EXPECT_GE(fakeHipBundleLoads(), 1u);
  // ncclMemAlloc: device memory of the current HIP device, usable by HIP copies.
  void* m = nullptr;
  ASSERT_EQ(ncclSuccess, ncclMemAlloc(&m, 1 << 20));
  std::vector<char> pattern(1 << 20, 7), back(1 << 20, 0);
  hipStream_t s = nullptr;
  ASSERT_EQ(hipSuccess, hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  EXPECT_EQ(hipSuccess, hipMemcpyAsync(m, pattern.data(), pattern.size(), hipMemcpyDefault, s));
  EXPECT_EQ(hipSuccess, hipMemcpyAsync(back.data(), m, back.size(), hipMemcpyDefault, s));
  EXPECT_EQ(hipSuccess, hipStreamSynchronize(s));
  EXPECT_EQ(pattern, back);
  EXPECT_EQ(fakeCudaIsDevicePointer(m), 1);
  EXPECT_EQ(ncclSuccess, ncclMemFree(m));
  hipStreamDestroy(s);
  matrixOnThreadRanks(2, false);
  EXPECT_EQ(fakeHipNonCoherentHostAllocs(), 0u) << "host memory for the device was allocated without "
                                                   "hipHostMallocCoherent";
  EXPECT_GT(fakeCudaKernelRuns("accl_coll_float32_sum"), 0u) << "no collective ran as a kernel";
  // The two ranks' mailboxes, which the other rank's kernel polls: fine-grained memory.
  EXPECT_GE(fakeHipFineGrainedAllocs(), 2u);
}

TEST(HipBackend, MatrixOnOneRank) { matrixOnThreadRanks(1, false); }
TEST(HipBackend, MatrixOnFourThreadRanksOnOneDevice) { matrixOnThreadRanks(4, false); }
TEST(HipBackend, MatrixOnTwoThreadRanksOnTwoDevices) { matrixOnThreadRanks(2, true); }
TEST(HipBackend, MatrixOnFourThreadRanksOnFourDevices) { matrixOnThreadRanks(4, true); }

// More ranks than the collective kernel serves (16): 18 thread ranks on 6 HIP devices run the
// all-reduce, broadcast and reduce part of the matrix (roots 0, 1, 9, 17) as staged kernels
// on the caller's stream (comm/staged_path.h), not through stream gates.
TEST(HipBackend, MatrixOnEighteenThreadRanksOnSixDevicesRunsStagedKernels) {
  setenv("FAKE_CUDA_DEVICES", "6", 1);  // read by the fake core at its first call
  REQUIRE_HIP_BACKEND();
  const int n = 18, devices = 6;
  if (hipDevices() < devices) GTEST_SKIP() << "SKIP: needs 6 HIP devices, the fake has " << hipDevices();
  // The all-reduce, broadcast and reduce part: the whole matrix runs on 18 CUDA ranks
  // (StagedPath.*), and the staged path is the same code over either driver table.
  accl_test::MatrixScope scope;
  scope.fewRoots = true;
  scope.onlyAllReduceBroadcastReduce = true;
  const auto cases = accl_test::buildMatrix(n, scope);
  std::vector<std::vector<std::string>> perRank(n);
  accl_test::Watchdog watchdog(n, 300);
  const unsigned long long memopsBefore = fakeCudaMemopRuns();
  std::string error;
  bool ok = runThreadRanks(
      n, [](int rank) { hipSetDevice(rank % devices); },
      [&](ncclComm_t comm, int rank) {
        HipMatrixDevice dev(true, rank % devices);
        perRank[rank] = accl_test::runMatrixCases(comm, rank, n, cases, &watchdog, false, &dev);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(perRank[r].empty()) << "rank " << r << ":\n" << accl_test::joinedLines(perRank[r]);
  EXPECT_GT(fakeCudaKernelRuns("accl_staged"), 0u) << "no staged kernel ran";
  EXPECT_EQ(fakeCudaMemopRuns(), memopsBefore) << "stream gates (hipStreamWaitValue64) served a collective";
}

// A child process's part of the multi-process tests: every case on HIP device buffers.
void runMatrixInChild(const accl_test::ChildRole& role) {
  hipSetDevice(0);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclSuccess, accl_test::initChildRankComm(role, &comm));
  HipMatrixDevice dev(false);
  accl_test::Watchdog watchdog(role.nranks, 120);
  auto cases = accl_test::buildMatrix(role.nranks, accl_test::MatrixScope{});
  auto messages = accl_test::runMatrixCases(comm, role.rank, role.nranks, cases, &watchdog, false, &dev);
  EXPECT_TRUE(messages.empty()) << accl_test::joinedLines(messages);
  EXPECT_EQ(ncclSuccess, ncclCommDestroy(comm));
}

using accl_test::childLogEnv;
using accl_test::childLogPath;
using accl_test::takeChildLogs;

// Three processes on one device: their kernels reach each other's mailboxes through HIP IPC
// (hipIpcGetMemHandle of whole allocations, opened at their base, with the release's
// hipIpcMemLazyEnablePeerAccess value).
TEST(HipBackend, MatrixOnThreeProcessesOnOneDevice) {
  if (const accl_test::ChildRole* role = accl_test::childRole()) return runMatrixInChild(*role);
  REQUIRE_HIP_BACKEND();
  const std::string path = childLogPath("accl_hip_mp_");
  auto r = accl_test::runChildProcesses(3, true, 0, childLogEnv(path), 300);
  EXPECT_TRUE(r.ok) << r.report;
  const std::string log = takeChildLogs(path);
  EXPECT_EQ(3, accl_test::occurrences(log, "HIP backend (")) << log;
  EXPECT_EQ(3, accl_test::occurrences(log, "collectives run as kernels on the caller's stream")) << log;
}

// Two processes that reach each other only through sockets (shared memory and IPC off): their
// kernels go through their network proxies.
TEST(HipBackend, MatrixOnTwoProcessesOverSocketsGoesThroughTheNetworkProxy) {
  if (const accl_test::ChildRole* role = accl_test::childRole()) return runMatrixInChild(*role);
  REQUIRE_HIP_BACKEND();
  const std::string path = childLogPath("accl_hip_sock_");
  std::vector<std::string> env = childLogEnv(path);
  env.insert(env.end(), {"NCCL_SHM_DISABLE=1", "NCCL_P2P_DISABLE=1"});
  auto r = accl_test::runChildProcesses(2, true, 0, env, 300);
  EXPECT_TRUE(r.ok) << r.report;
  const std::string log = takeChildLogs(path);
  EXPECT_EQ(2, accl_test::occurrences(log, "collectives run as kernels on the caller's stream")) << log;
  EXPECT_EQ(1, accl_test::occurrences(log, "network proxy for ranks 1 via NET")) << log;
  EXPECT_EQ(1, accl_test::occurrences(log, "network proxy for ranks 0 via NET")) << log;
}

// An all-reduce captured into a HIP graph replays with new inputs each time.
TEST(HipBackend, CapturedAllReduceReplaysWithNewInputsEveryTime) {
  REQUIRE_HIP_BACKEND();
  const int n = 2;
  const size_t count = 4099;
  std::vector<std::string> problems(n);
  std::string error;
  bool ok = runThreadRanks(
      n, [](int) { hipSetDevice(0); },
      [&](ncclComm_t comm, int rank) {
        hipStream_t s = nullptr;
        ASSERT_EQ(hipSuccess, hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
        void *in = nullptr, *out = nullptr;
        ASSERT_EQ(hipSuccess, hipMalloc(&in, count * 4));
        ASSERT_EQ(hipSuccess, hipMalloc(&out, count * 4));
        ASSERT_EQ(hipSuccess, hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal));
        ASSERT_EQ(ncclSuccess,
                  ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, reinterpret_cast<cudaStream_t>(s)));
        hipGraph_t graph = nullptr;
        ASSERT_EQ(hipSuccess, hipStreamEndCapture(s, &graph));
        hipGraphExec_t exec = nullptr;
        ASSERT_EQ(hipSuccess, hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
        for (int replay = 0; replay < 3; replay++) {
          std::vector<int32_t> host(count);
          for (size_t i = 0; i < count; i++) host[i] = static_cast<int32_t>(i * (rank + 1) + replay * 1000);
          ASSERT_EQ(hipSuccess, hipMemcpyAsync(in, host.data(), count * 4, hipMemcpyDefault, s));
          ASSERT_EQ(hipSuccess, hipStreamSynchronize(s));
          ASSERT_EQ(hipSuccess, hipGraphLaunch(exec, s));
          ASSERT_EQ(hipSuccess, hipStreamSynchronize(s));
          ASSERT_EQ(hipSuccess, hipMemcpyAsync(host.data(), out, count * 4, hipMemcpyDefault, s));
          ASSERT_EQ(hipSuccess, hipStreamSynchronize(s));
          for (size_t i = 0; i < count; i++) {
            const int32_t want = static_cast<int32_t>(i * 3 + replay * 2000);  // ranks 1 and 2 times i
            if (host[i] != want) {
              problems[rank] += "replay " + std::to_string(replay) + " element " + std::to_string(i) + ": got " +
                                std::to_string(host[i]) + " want " + std::to_string(want) + "\n";
              break;
            }
          }
        }
        hipGraphExecDestroy(exec);
        hipGraphDestroy(graph);
        hipFree(in);
        hipFree(out);
        hipStreamDestroy(s);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(problems[r].empty()) << problems[r];
}

// ncclCommAbort with an all-reduce queued on a stream that has not reached it (held by a
// stream wait on a coherent host flag): abort returns, and the stream, once released, finishes.
TEST(HipBackend, AbortWithWorkQueuedOnAHeldStreamReturnsAndReleasesTheStream) {
  REQUIRE_HIP_BACKEND();
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; rank++) {
    threads.emplace_back([&, rank] {
      hipSetDevice(0);
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclSuccess, ncclCommInitRank(&comm, 2, id, rank));
      void* buf = nullptr;
      ASSERT_EQ(hipSuccess, hipMalloc(&buf, 4096));
      void* flagHost = nullptr;
      ASSERT_EQ(hipSuccess, hipHostMalloc(&flagHost, 64, hipHostMallocMapped | hipHostMallocCoherent));
      auto* flag = static_cast<volatile uint64_t*>(flagHost);
      *flag = 0;
      void* flagDev = nullptr;
      ASSERT_EQ(hipSuccess, hipHostGetDevicePointer(&flagDev, flagHost, 0));
      hipStream_t held = nullptr;
      ASSERT_EQ(hipSuccess, hipStreamCreateWithFlags(&held, hipStreamNonBlocking));
      ASSERT_EQ(hipSuccess, hipStreamWaitValue64(held, flagDev, 1, hipStreamWaitValueGte, ~uint64_t{0}));
      ASSERT_EQ(ncclSuccess, ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm,
                                           reinterpret_cast<cudaStream_t>(held)));
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(ncclSuccess, ncclCommAbort(comm));
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
      *flag = 1;
      EXPECT_EQ(hipSuccess, hipStreamSynchronize(held));  // no hang: the aborted kernel gave up
      hipStreamDestroy(held);
      hipHostFree(flagHost);
      hipFree(buf);
      done++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(2, done.load());
}

// Pageable host memory (hipPointerGetAttributes: unregistered in ROCm 6, an error in 5), a
// buffer of another HIP device, a stream of another HIP device (hipStreamGetDevice) and an ACCL
// host stream are refused by name, each with a WARN saying what to pass instead.
TEST(HipBackend, HostAndOtherDeviceBuffersAndStreamsAreRefusedByName) {
  REQUIRE_HIP_BACKEND();
  if (hipDevices() < 2) GTEST_SKIP() << "SKIP: needs 2 HIP devices, the fake has " << hipDevices();
  std::string error;
  bool ok = runThreadRanks(
      1, [](int) { hipSetDevice(0); },
      [&](ncclComm_t comm, int) {
        void *other = nullptr, *mine = nullptr;
        hipStream_t otherStream = nullptr;
        ASSERT_EQ(hipSuccess, hipSetDevice(1));
        ASSERT_EQ(hipSuccess, hipMalloc(&other, 4096));
        ASSERT_EQ(hipSuccess, hipStreamCreateWithFlags(&otherStream, hipStreamNonBlocking));
        ASSERT_EQ(hipSuccess, hipSetDevice(0));
        ASSERT_EQ(hipSuccess, hipMalloc(&mine, 4096));
        std::vector<float> host(16, 1.0f);
        EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(host.data(), host.data(), 16, ncclFloat32, ncclSum, comm, nullptr));
        std::string last = ncclGetLastError(comm);
        EXPECT_NE(last.find("is host memory that the device cannot reach, but this communicator runs on HIP device 0: "
                            "pass device memory (hipMalloc, ncclMemAlloc)"),
                  std::string::npos)
            << last;
        EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(other, mine, 16, ncclFloat32, ncclSum, comm, nullptr));
        last = ncclGetLastError(comm);
        EXPECT_NE(last.find("is memory of HIP device 1, but this communicator is bound to device 0"), std::string::npos)
            << last;
        EXPECT_EQ(ncclInvalidArgument,
                  ncclAllReduce(mine, mine, 16, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(otherStream)));
        last = ncclGetLastError(comm);
        if (fakeHipRocmMajor() >= 6) {  // hipStreamGetDevice is not in ROCm 5.2
          EXPECT_NE(last.find("belongs to another HIP device than this communicator's (device 0)"), std::string::npos)
              << last;
        }
        cudaStream_t hs = nullptr;
        ASSERT_EQ(ncclSuccess, ncclHostStreamCreate(&hs));
        EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(mine, mine, 16, ncclFloat32, ncclSum, comm, hs));
        last = ncclGetLastError(comm);
        EXPECT_NE(last.find("is an ACCL host stream, but this communicator runs on HIP device 0: pass a HIP stream"),
                  std::string::npos)
            << last;
        ncclHostStreamDestroy(hs);
        hipFree(mine);
        hipSetDevice(1);
        hipStreamDestroy(otherStream);
        hipFree(other);
        hipSetDevice(0);
      },
      &error);
  ASSERT_TRUE(ok) << error;
}

}  // namespace
}  // namespace accl_hip_test
