// The CUDA backend through the public API: the collective matrix on device buffers (threads
// and processes), stream ordering without blocking the host, CUDA graph capture and replay,
// bad input and abort with work in flight. Runs on the fake driver (label fakegpu, CI) and on
// a real GPU (label gpu); skips with the reason where there is no driver.
#include <cstdlib>
#include <gtest/gtest.h>
#include <algorithm>
#include <array>
#include <barrier>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <fstream>
#include <sstream>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
#include "accl.h"
#include "common/collective_matrix.h"
#include "common/rank_runner.h"
#include "cuda/device_matrix.h"
#include "cuda/test_driver.h"
#include "fake_cuda/fake_cuda_test_api.h"
#include "nccl.h"
#include "common/child_logs.h"
#include "common/text_file.h"

namespace accl_cuda_test {
namespace {

using accl_test::runThreadRanks;

#define REQUIRE_DRIVER(d)                                      \
  std::string why_;                                            \
  const TestDriver* d = testDriver(&why_);                     \
  if (d == nullptr) GTEST_SKIP() << "SKIP: " << why_;

// The start of every child process of a multi-process test: the driver (the parent has
// checked that there is one) and the communicator of the child's rank.
#define CHILD_RANK(role, d, comm)                                 \
  std::string childWhy_;                                          \
  const TestDriver* d = testDriver(&childWhy_);                   \
  ASSERT_NE(d, nullptr) << childWhy_;                             \
  ncclComm_t comm = nullptr;                                      \
  ASSERT_EQ(ncclSuccess, accl_test::initChildRankComm(role, &comm))

// The whole matrix on n thread ranks of this process sharing device 0.
void matrixOnThreadRanksOnOneDevice(int n) {
  REQUIRE_DRIVER(d);
  accl_test::MatrixScope scope;
  const auto cases = accl_test::buildMatrix(n, scope);
  std::vector<std::vector<std::string>> perRank(n);
  accl_test::Watchdog watchdog(n, 240);
  std::string error;
  bool ok = runThreadRanks(
      n,
      [&](ncclComm_t comm, int rank) {
        useDevice(0);
        DriverMatrixDevice dev(*d, true);
        perRank[rank] = accl_test::runMatrixCases(comm, rank, n, cases, &watchdog, false, &dev);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(perRank[r].empty()) << accl_test::joinedLines(perRank[r]);
}

TEST(CudaBackend, MatrixOnTwoThreadRanksOnOneDevice) { matrixOnThreadRanksOnOneDevice(2); }
// Four ranks of one process on one device: their kernels (10 blocks each) run side by side.
TEST(CudaBackend, MatrixOnFourThreadRanksOnOneDevice) { matrixOnThreadRanksOnOneDevice(4); }

// The matrix with every rank on its own device (one rank per GPU, as torchrun and Megatron-LM
// run): the kernels reach each other's mailboxes through peer access. ctest runs it with four
// fake devices, with CUDA_DEVICE_MAX_CONNECTIONS unset and set to 1 (as Megatron-LM sets it):
// one hardware queue per device hangs nothing, since no kernel waits for work of its own device.
void matrixOnThreadRanksOnTheirOwnDevices(int n, bool oneQueue) {
  setenv("FAKE_CUDA_DEVICES", "4", 0);  // the fake reads them at cuInit; a real driver ignores them
  if (oneQueue) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  REQUIRE_DRIVER(d);
  int devices = 0;
  d->deviceGetCount(&devices);
  if (devices < n)
    GTEST_SKIP() << "SKIP: needs " << n << " CUDA devices, this machine has " << devices
                 << " (the fake driver gives it 4)";
  accl_test::MatrixScope scope;
  const auto cases = accl_test::buildMatrix(n, scope);
  std::vector<std::vector<std::string>> perRank(n);
  accl_test::Watchdog watchdog(n, 240);
  std::string error;
  std::vector<std::string> logs(n);
  bool ok = runThreadRanks(
      n, [](int rank) { useDevice(rank); },
      [&](ncclComm_t comm, int rank) {
        // NCCL leaves the caller's current device alone.
        CUdevice dv = 0;
        CUcontext want = nullptr, cur = nullptr;
        d->deviceGet(&dv, rank);
        d->primaryCtxRetain(&want, dv);
        d->ctxGetCurrent(&cur);
        EXPECT_EQ(want, cur) << "rank " << rank << ": ncclCommInitRank changed the calling thread's CUDA context";
        DriverMatrixDevice dev(*d, false, rank);
        perRank[rank] = accl_test::runMatrixCases(comm, rank, n, cases, &watchdog, false, &dev);
      },
      &error);
  if (oneQueue) unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(perRank[r].empty()) << accl_test::joinedLines(perRank[r]);
}

TEST(CudaBackend, MatrixOnTwoThreadRanksOnTwoDevices) { matrixOnThreadRanksOnTheirOwnDevices(2, false); }
TEST(CudaBackend, MatrixOnFourThreadRanksOnFourDevices) { matrixOnThreadRanksOnTheirOwnDevices(4, false); }
TEST(CudaBackend, MatrixOnFourThreadRanksOnFourDevicesWithOneHardwareQueue) {
  matrixOnThreadRanksOnTheirOwnDevices(4, true);
}

// One thread queues in-place all-reduces of int32 for ranks comms[0..n) (rank r on device
// devs[r], on stream st[r]) in groups, three times over, small (every rank folds everything)
// and large (a slice each, then gathered); every element is checked.
void groupAllReducesAreExact(const TestDriver& d, const ncclComm_t* comms, const int* devs, const CUstream* st,
                             int n) {
  for (const size_t count : {size_t{1000}, size_t{300000}}) {
    std::vector<CUdeviceptr> buf(n);
    for (int r = 0; r < n; r++) {
      useDevice(devs[r]);
      ASSERT_EQ(CUDA_SUCCESS, d.memAlloc(&buf[r], count * 4));
      std::vector<int32_t> v(count);
      for (size_t i = 0; i < count; i++) v[i] = static_cast<int32_t>((i % 89) + r);
      ASSERT_EQ(CUDA_SUCCESS, d.memcpyHtoD(buf[r], v.data(), count * 4));
    }
    for (int iter = 0; iter < 3; iter++) {
      ASSERT_EQ(ncclSuccess, ncclGroupStart());
      for (int r = 0; r < n; r++)
        ASSERT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf[r]), reinterpret_cast<void*>(buf[r]), count,
                                             ncclInt32, ncclSum, comms[r], reinterpret_cast<cudaStream_t>(st[r])));
      ASSERT_EQ(ncclSuccess, ncclGroupEnd());
    }
    for (int r = 0; r < n; r++) {
      useDevice(devs[r]);
      ASSERT_EQ(CUDA_SUCCESS, d.streamSynchronize(st[r]));
      std::vector<int32_t> v(count);
      d.memcpyDtoH(v.data(), buf[r], count * 4);
      size_t wrong = 0, first = 0;
      // Each all-reduce sums n * (i % 89) + 0 + 1 + ... + (n - 1); the next two multiply by n.
      for (size_t i = 0; i < count; i++)
        if (v[i] != static_cast<int32_t>((n * static_cast<int64_t>(i % 89) + n * (n - 1) / 2) * n * n) && !wrong++)
          first = i;
      EXPECT_EQ(0u, wrong) << "rank " << r << ", " << count << " elements: the first wrong at " << first << " is "
                           << v[first];
      d.memFree(buf[r]);
    }
  }
}

// Device 3 has no peer access to the others (FAKE_CUDA_NO_P2P; on a real host: GPUs behind
// different PCIe root complexes without P2P). Ranks 0-2 use each other's mailboxes, and every
// rank reaches rank 3 (and rank 3 every rank) through its network proxy over shared memory,
// still as kernels on the caller's stream. The whole matrix.
TEST(CudaBackend, MatrixOnFourDevicesOneWithoutPeerAccessGoesThroughTheProxy) {
  setenv("FAKE_CUDA_NO_P2P", "3", 1);
  const std::string log = testing::TempDir() + "nop2p" + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
  matrixOnThreadRanksOnTheirOwnDevices(4, false);
  const std::string text = accl_test::readFile(log);
  unlink(log.c_str());
  if (text.empty()) return;  // skipped above
  EXPECT_EQ(0, accl_test::occurrences(text, "collectives use the")) << text;
  EXPECT_EQ(3, accl_test::occurrences(text, "network proxy for ranks 3 via SHM")) << text;
  EXPECT_EQ(1, accl_test::occurrences(text, "network proxy for ranks 0 via SHM, 1 via SHM, 2 via SHM")) << text;
}

// The same host, one thread driving all four ranks in groups (nccl-tests -g 4 with devices
// 0, 0, 3, 3): ranks 0 and 1 share a launch on device 0's stream, 2 and 3 on device 3's; within
// each pair they use mailboxes, across the pairs the proxy. Small and large all-reduces.
TEST(CudaBackend, OneThreadDrivesRanksOnTwoDevicesWithoutPeerAccessInOneGroup) {
  setenv("FAKE_CUDA_DEVICES", "4", 0);
  setenv("FAKE_CUDA_NO_P2P", "3", 1);
  REQUIRE_DRIVER(d);
  int devices = 0;
  d->deviceGetCount(&devices);
  if (devices < 4) GTEST_SKIP() << "SKIP: needs 4 CUDA devices, this machine has " << devices;
  constexpr int n = 4;
  ncclComm_t comms[n] = {};
  int devs[n] = {0, 0, 3, 3};
  ASSERT_EQ(ncclSuccess, ncclCommInitAll(comms, n, devs));
  CUstream st[n] = {};
  for (int r = 0; r < n; r += 2) {
    useDevice(devs[r]);
    ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&st[r], CU_STREAM_NON_BLOCKING));
    st[r + 1] = st[r];  // the pair on one device shares the stream
  }
  groupAllReducesAreExact(*d, comms, devs, st, n);
  for (int r = 0; r < n; r += 2) d->streamDestroy(st[r]);
  for (auto c : comms) EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
}

// Six thread ranks on four devices: two ranks on devices 0 and 1, one alone on 2 and on 3. A rank
// alone on its device reaches every peer through shared memory while the others also have a
// CUDA IPC peer; init once hung here (only the lone ranks made the collective ShmDirect board).
// Then all-reduces of a small buffer (every rank folds everything) and a large one (a slice
// each, then gathered), in place, each element checked; the ranks leave one after the other
// as soon as they have their result, while the others' kernels may still write their last
// counters into the mailboxes of the ranks that left (held until the last of them is done).
TEST(CudaBackend, SixRanksOnFourDevicesUnevenlyAllReduceAsKernels) {
  setenv("FAKE_CUDA_DEVICES", "4", 0);
  REQUIRE_DRIVER(d);
  int devices = 0;
  d->deviceGetCount(&devices);
  if (devices < 4) GTEST_SKIP() << "SKIP: needs 4 CUDA devices, this machine has " << devices;
  const int n = 6;
  const std::vector<size_t> counts = {1000, 100000, 400000};
  std::vector<std::string> problems(n);
  std::barrier<> meet(n);
  std::string error;
  bool ok = runThreadRanks(
      n, [](int rank) { useDevice(rank % 4); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        // Every buffer is allocated before the first collective and freed after the last: cuMemFree
        // waits for the whole device, where a peer's kernel may wait for this rank's next call.
        std::vector<CUdeviceptr> bufs(counts.size());
        for (size_t k = 0; k < counts.size(); k++) ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&bufs[k], counts[k] * 4));
        meet.arrive_and_wait();
        for (size_t k = 0; k < counts.size(); k++) {
          const size_t count = counts[k];
          std::vector<int32_t> v(count);
          for (size_t i = 0; i < count; i++) v[i] = static_cast<int32_t>((i % 97) * (rank + 1));
          // On the stream: a copy from pageable memory may still land after a kernel of a
          // non-blocking stream has run.
          ASSERT_EQ(CUDA_SUCCESS, d->memcpyHtoDAsync(bufs[k], v.data(), count * 4, s));
          EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(bufs[k]), reinterpret_cast<void*>(bufs[k]),
                                               count, ncclInt32, ncclSum, comm, reinterpret_cast<cudaStream_t>(s)));
          EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
          d->memcpyDtoH(v.data(), bufs[k], count * 4);
          size_t wrong = 0, first = 0;
          for (size_t i = 0; i < count; i++)
            if (v[i] != static_cast<int32_t>((i % 97) * n * (n + 1) / 2) && !wrong++) first = i;
          if (wrong && problems[rank].empty())
            problems[rank] = std::to_string(count) + " elements: " + std::to_string(wrong) + " wrong, the first at " +
                             std::to_string(first) + " is " + std::to_string(v[first]);
        }
        meet.arrive_and_wait();
        for (CUdeviceptr b : bufs) d->memFree(b);
        d->streamDestroy(s);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
}

// Sixteen ranks (two hosts of eight GPUs' worth), two per device on eight devices, device 7
// without peer access (so ranks 14 and 15 are reached through the proxies): all-reduces small
// (every rank folds everything) and large (46 blocks per rank), an all-gather and a broadcast
// from rank 13, as kernels on the callers' streams, every element
// checked.
TEST(CudaBackend, SixteenRanksOnEightDevicesRunCollectivesAsKernels) {
  setenv("FAKE_CUDA_DEVICES", "8", 0);
  setenv("FAKE_CUDA_NO_P2P", "7", 1);
  const std::string log = testing::TempDir() + "sixteen" + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
  REQUIRE_DRIVER(d);
  int devices = 0;
  d->deviceGetCount(&devices);
  if (devices < 8) GTEST_SKIP() << "SKIP: needs 8 CUDA devices, this machine has " << devices;
  constexpr int n = 16;
  const size_t big = 300000, part = 5000;
  std::vector<std::string> problems(n);
  std::barrier<> meet(n);
  std::string error;
  auto expectAll = [&](int rank, const std::vector<int32_t>& v, const std::function<int32_t(size_t)>& want,
                       const char* what) {
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < v.size(); i++)
      if (v[i] != want(i) && !wrong++) first = i;
    if (wrong && problems[rank].empty())
      problems[rank] = std::string(what) + ": " + std::to_string(wrong) + " wrong of " + std::to_string(v.size()) +
                       ", the first at " + std::to_string(first) + " is " + std::to_string(v[first]) + " not " +
                       std::to_string(want(first));
  };
  bool ok = runThreadRanks(
      n, [](int rank) { useDevice(rank / 2); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        CUdeviceptr small = 0, large = 0, gathered = 0, bcast = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&small, 1000 * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&large, big * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&gathered, n * part * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&bcast, big * 4));
        auto fill = [&](CUdeviceptr b, size_t count, int32_t k) {
          std::vector<int32_t> v(count);
          for (size_t i = 0; i < count; i++) v[i] = static_cast<int32_t>(i % 101) + k;
          ASSERT_EQ(CUDA_SUCCESS, d->memcpyHtoDAsync(b, v.data(), count * 4, s));
          ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
        };
        fill(small, 1000, rank);
        fill(large, big, rank);
        fill(bcast, big, rank * 1000);
        fill(gathered + rank * part * 4, part, rank * 7);  // in place: rank r's share sits at r * part
        meet.arrive_and_wait();  // buffers of every rank exist before the first collective
        auto* sm = reinterpret_cast<void*>(small);
        auto* lg = reinterpret_cast<void*>(large);
        auto* ga = reinterpret_cast<int32_t*>(gathered);
        auto* bc = reinterpret_cast<void*>(bcast);
        auto st = reinterpret_cast<cudaStream_t>(s);
        EXPECT_EQ(ncclSuccess, ncclAllReduce(sm, sm, 1000, ncclInt32, ncclSum, comm, st));
        EXPECT_EQ(ncclSuccess, ncclAllReduce(lg, lg, big, ncclInt32, ncclSum, comm, st));
        EXPECT_EQ(ncclSuccess, ncclAllGather(ga + rank * part, ga, part, ncclInt32, comm, st));
        EXPECT_EQ(ncclSuccess, ncclBroadcast(bc, bc, big, ncclInt32, 13, comm, st));
        ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
        const int32_t ranksSum = n * (n - 1) / 2;
        std::vector<int32_t> v(1000);
        d->memcpyDtoH(v.data(), small, 1000 * 4);
        expectAll(rank, v, [&](size_t i) { return static_cast<int32_t>(n * (i % 101)) + ranksSum; }, "small all-reduce");
        v.resize(big);
        d->memcpyDtoH(v.data(), large, big * 4);
        expectAll(rank, v, [&](size_t i) { return static_cast<int32_t>(n * (i % 101)) + ranksSum; }, "large all-reduce");
        d->memcpyDtoH(v.data(), bcast, big * 4);
        expectAll(rank, v, [&](size_t i) { return static_cast<int32_t>(i % 101) + 13000; }, "broadcast");
        v.resize(n * part);
        d->memcpyDtoH(v.data(), gathered, n * part * 4);
        expectAll(rank, v, [&](size_t i) { return static_cast<int32_t>((i % part) % 101 + (i / part) * 7); }, "all-gather");
        meet.arrive_and_wait();
        d->memFree(small);
        d->memFree(large);
        d->memFree(bcast);
        d->memFree(gathered);
        d->streamDestroy(s);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
  const std::string text = accl_test::readFile(log);
  unlink(log.c_str());
  EXPECT_EQ(0, accl_test::occurrences(text, "collectives use the")) << text;
  EXPECT_EQ(n, accl_test::occurrences(text, "collectives run as kernels on the caller's stream")) << text;
}

// A GPU with 16 SMs holds 16 x 8 blocks of the collective kernel at once (the fake's occupancy:
// 2048 threads per SM, 256 per block); three ranks on it could need 3 x 48 launched side by
// side, and blocks that are not resident never run while the resident ones wait for them. So
// init refuses it on every rank of that device, naming how many ranks per GPU fit; two fit.
TEST(CudaBackend, MoreRanksOnOneDeviceThanItsResidentBlocksHoldAreRefusedAtInit) {
  setenv("FAKE_CUDA_SMS", "32", 1);
  const std::string log = testing::TempDir() + "resident" + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
  REQUIRE_DRIVER(d);
  std::string error;
  bool ok = runThreadRanks(3, [](int) { useDevice(0); }, [](ncclComm_t, int) {}, &error);
  EXPECT_FALSE(ok) << "three ranks on a 32-SM device were accepted (4 blocks of 512 threads per SM)";
  const std::string text = accl_test::readFile(log);
  unlink(log.c_str());
  EXPECT_EQ(3, accl_test::occurrences(text, "all of them must be resident at once")) << text;
  EXPECT_NE(std::string::npos, text.find("where the device holds 128. Run at most 2 ranks of one communicator per GPU"))
      << text;
  std::vector<std::string> problems(2);
  ok = runThreadRanks(
      2, [](int) { useDevice(0); },
      [&](ncclComm_t comm, int rank) {
        CUdeviceptr b = 0;
        CUstream s = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&b, 4000));
        std::vector<int32_t> v(1000, rank + 1);
        d->memcpyHtoD(b, v.data(), 4000);
        EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(b), reinterpret_cast<void*>(b), 1000, ncclInt32,
                                             ncclSum, comm, reinterpret_cast<cudaStream_t>(s)));
        d->streamSynchronize(s);
        d->memcpyDtoH(v.data(), b, 4000);
        if (v[0] != 3 || v[999] != 3) problems[rank] = "sum " + std::to_string(v[0]) + ", " + std::to_string(v[999]);
        d->streamDestroy(s);
        d->memFree(b);
      },
      &error);
  EXPECT_TRUE(ok) << error;
  for (int r = 0; r < 2; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
}

// Mismatched calls on the kernel path (issue 27 on GPUs): every chunk carries its sender's call
// stamp next to it (in the peer's mailbox, or through the network proxy's frame header), and
// the receiving kernel checks it before it uses the chunk. Two thread ranks on one device
// (mailboxes) or, with NCCL_P2P_DISABLE=1, through their proxies over shared memory: counts
// 1000 vs 2000, float32 vs int32, sum vs max, a group's send and receive of 500 vs 1000
// elements, and reduces whose roots differ (no chunk of the other call ever arrives: each
// waiting kernel compares its call with the one the peer published in its mailbox header, or,
// through the proxies, with the one the peer's proxy announced once nothing moved for 20 ms).
// Different operations: rank 0 all-reduces while rank 1 takes the call for a broadcast from rank 0.
// A call missing on one rank: rank 0 broadcasts and then all-reduces, rank 1 only all-reduces,
// so its all-reduce meets rank 0's broadcast and rank 0's next all-reduce meets rank 1's (or
// learns of it from rank 1 first). The mismatched call does not hang (the kernels give up),
// ncclCommGetAsyncError then says ncclInvalidUsage on both ranks (the rank that saw it froze
// both), and the WARN names both calls. Each rank's next call realigns the streams and fails
// (comm/kernel_realign.cc), and the call after is exact. A matched call before it is exact,
// as stamps must not fail matched calls.
// The mismatch tests' set-up: NCCL_P2P_DISABLE=1 for the proxy variants, and WARNs into a
// file of their own (returned) for the test to read.
std::string mismatchTestLog(bool proxy, const char* tag) {
  if (proxy) setenv("NCCL_P2P_DISABLE", "1", 1);
  const std::string log = testing::TempDir() + tag + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
  ncclResetDebugInit();  // the log settings are read once: several tests may run in one process
  return log;
}

// The end of a mismatch test: NCCL_P2P_DISABLE unset, and the WARNs written to `log`.
std::string takeMismatchTestLog(const std::string& log) {
  unsetenv("NCCL_P2P_DISABLE");
  std::string text = accl_test::readFile(log);
  unlink(log.c_str());
  return text;
}

// A rank of a mismatch test: its stream and a buffer of 2000 int32 after an all-reduce of
// rank + 1 that every rank matches (stamps must not fail matched calls); "" when that sum over
// n ranks is exact, else what it gave. The copies go on the rank's own stream: a synchronous
// copy goes through the legacy stream, which may share a hardware queue with another rank's
// stream whose kernel waits for this rank's next call (4 ranks of one process on one device).
std::string matchedAllReduceFirst(const TestDriver* d, ncclComm_t comm, int rank, int n, CUstream* s, CUdeviceptr* b) {
  if (d->streamCreate(s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS || d->memAlloc(b, 2000 * 4) != CUDA_SUCCESS)
    return "no stream or buffer";
  std::vector<int32_t> v(2000, rank + 1);
  void* p = reinterpret_cast<void*>(*b);
  if (d->memcpyHtoDAsync(*b, v.data(), 2000 * 4, *s) != CUDA_SUCCESS) return "the upload failed";
  if (ncclAllReduce(p, p, 2000, ncclInt32, ncclSum, comm, reinterpret_cast<cudaStream_t>(*s)) != ncclSuccess)
    return "the matched all-reduce was refused";
  if (d->memcpyDtoHAsync(v.data(), *b, 2000 * 4, *s) != CUDA_SUCCESS || d->streamSynchronize(*s) != CUDA_SUCCESS)
    return "the matched all-reduce did not end";
  const int sum = n * (n + 1) / 2;
  if (v[0] != sum || v[1999] != sum) {
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    return "the matched all-reduce gave " + std::to_string(v[0]) + " (the communicator's async error: " +
           ncclGetErrorString(async) + ")";
  }
  return "";
}

// After a mismatched call: `tries` matched all-reduces of rank + 1 (1000 int32) on `s`. Each
// must either fail with ncclInvalidUsage (its own result, or the communicator's async error
// once it has run: a frozen communicator, or the call that realigns its streams) or succeed
// with the exact sum over n ranks: never a success with wrong data. The last must succeed on
// every rank. Returns "" if so, else what happened; *failures counts the failed ones.
std::string matchedAllReducesAfter(const TestDriver* d, ncclComm_t comm, int rank, int n, CUstream s, CUdeviceptr b,
                                   int tries, int* failures) {
  const auto st = reinterpret_cast<cudaStream_t>(s);
  void* p = reinterpret_cast<void*>(b);
  const int sum = n * (n + 1) / 2;
  std::string what;
  for (int t = 0; t < tries; t++) {
    std::vector<int32_t> v(1000, rank + 1);
    if (d->memcpyHtoDAsync(b, v.data(), 4000, s) != CUDA_SUCCESS) return "the upload failed";
    ncclResult_t r = ncclAllReduce(p, p, 1000, ncclInt32, ncclSum, comm, st);
    if (d->memcpyDtoHAsync(v.data(), b, 4000, s) != CUDA_SUCCESS || d->streamSynchronize(s) != CUDA_SUCCESS)
      return "matched all-reduce " + std::to_string(t + 1) + " did not end";
    if (r == ncclSuccess) ncclCommGetAsyncError(comm, &r);
    if (r == ncclInvalidUsage) {
      (*failures)++;
      what += " fails";
      if (t == tries - 1) return "the last matched all-reduce failed too:" + what;
      continue;
    }
    if (r != ncclSuccess) return "matched all-reduce " + std::to_string(t + 1) + ": " + ncclGetErrorString(r) + what;
    if (v[0] != sum || v[999] != sum)
      return "matched all-reduce " + std::to_string(t + 1) + " succeeded with " + std::to_string(v[0]) + " instead of " +
             std::to_string(sum) + what;
    what += " exact";
  }
  return "";
}

class KernelMismatch : public testing::TestWithParam<std::tuple<const char*, bool>> {};

TEST_P(KernelMismatch, FailsOnBothRanksNamingBothCallsInsteadOfWrongDataOrAHang) {
  const std::string kind = std::get<0>(GetParam());
  const bool proxy = std::get<1>(GetParam());
  const std::string log = mismatchTestLog(proxy, "kmismatch");
  REQUIRE_DRIVER(d);
  std::vector<std::string> problems(2), after(2);
  std::vector<ncclResult_t> async(2, ncclSuccess);
  accl_test::Watchdog watchdog(2, 120);
  std::string error;
  bool ok = runThreadRanks(
      2, [](int) { useDevice(0); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        CUdeviceptr b = 0;
        problems[rank] = matchedAllReduceFirst(d, comm, rank, 2, &s, &b);
        if (s == nullptr || b == 0) return;
        auto st = reinterpret_cast<cudaStream_t>(s);
        void* p = reinterpret_cast<void*>(b);
        size_t count = 1000;
        ncclDataType_t type = ncclInt32;
        ncclRedOp_t op = ncclSum;
        if (rank == 1 && kind == "count") count = 2000;
        if (rank == 1 && kind == "type") type = ncclFloat32;
        if (rank == 1 && kind == "op") op = ncclMax;
        // Queued without an error: the mismatch shows once the kernels have run.
        if (kind == "send") {
          // Rank 0 sends and receives 1000 elements, rank 1 2000: each receives another size.
          const size_t n = rank == 0 ? 1000 : 2000;
          EXPECT_EQ(ncclSuccess, ncclGroupStart());
          EXPECT_EQ(ncclSuccess, ncclSend(p, n / 2, ncclInt32, 1 - rank, comm, st));
          EXPECT_EQ(ncclSuccess, ncclRecv(static_cast<int32_t*>(p) + 1000, n / 2, ncclInt32, 1 - rank, comm, st));
          EXPECT_EQ(ncclSuccess, ncclGroupEnd());
        } else if (kind == "operation") {
          // Rank 0 all-reduces, rank 1 takes it for a broadcast from rank 0.
          if (rank == 0) {
            EXPECT_EQ(ncclSuccess, ncclAllReduce(p, p, 1000, ncclInt32, ncclSum, comm, st));
          } else {
            EXPECT_EQ(ncclSuccess, ncclBroadcast(p, p, 1000, ncclInt32, 0, comm, st));
          }
        } else if (kind == "missing") {
          if (rank == 0) {
            EXPECT_EQ(ncclSuccess, ncclBroadcast(p, p, 1000, ncclInt32, 0, comm, st));
          }
          EXPECT_EQ(ncclSuccess, ncclAllReduce(p, p, 1000, ncclInt32, ncclSum, comm, st));
        } else if (kind == "root") {
          // Each rank believes it is the root: each waits for the other's contribution forever.
          EXPECT_EQ(ncclSuccess, ncclReduce(p, p, 1000, ncclInt32, ncclSum, rank, comm, st));
        } else {
          EXPECT_EQ(ncclSuccess, ncclAllReduce(p, p, count, type, op, comm, st));
        }
        EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(s)) << "the mismatched call did not end";
        ncclCommGetAsyncError(comm, &async[rank]);
        // The next call realigns the streams and fails; the one after is exact. Where rank 1
        // lacks the broadcast its calls are numbered one behind: its second call also fails
        // (rank 0 had numbered it), and it needs one more call to pair with rank 0's last.
        watchdog.at(rank, "the matched calls after the mismatched one");
        const int expectFailures = kind == "missing" && rank == 1 ? 2 : 1;
        int failures = 0;
        after[rank] = matchedAllReducesAfter(d, comm, rank, 2, s, b, 2 + expectFailures, &failures);
        if (after[rank].empty() && failures != expectFailures)
          after[rank] = std::to_string(failures) + " matched calls failed after it, not " + std::to_string(expectFailures);
        watchdog.at(rank, "done");
        d->streamDestroy(s);
        d->memFree(b);
      },
      &error);
  const std::string text = takeMismatchTestLog(log);
  EXPECT_TRUE(ok) << error;
  for (int r = 0; r < 2; r++) {
    EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
    EXPECT_TRUE(after[r].empty()) << "rank " << r << ": " << after[r] << "\n" << text;
    // The rank that saw it told the other, whose kernel gave up: both see it before their next call.
    EXPECT_EQ(ncclInvalidUsage, async[r]) << "rank " << r << "\n" << text;
  }
  EXPECT_EQ(2, accl_test::occurrences(text, "it realigned the collective streams after mismatched calls")) << text;
  if (kind == "missing" || kind == "operation") {
    // Each rank may meet the other's data of another call (rank 1 rank 0's broadcast or
    // all-reduce, rank 0 rank 1's all-reduce of an earlier call), or learn of it from the
    // other first: a WARN names the calls.
    EXPECT_NE(std::string::npos, text.find("mismatched calls: rank")) << text;
    EXPECT_NE(std::string::npos, text.find("AllReduce(1000 x int32, sum) (call #2)")) << text;
    if (kind == "operation") {
      EXPECT_NE(std::string::npos, text.find("Broadcast(1000 x int32, root 0) (call #2)")) << text;
    }
    return;
  }
  // One rank or both saw it (the first to see it tells the other, whose kernel may give up first).
  EXPECT_LE(1, accl_test::occurrences(text, "mismatched calls: rank")) << text;
  const char* mine = kind == "send"   ? "a send of 2000 bytes from rank"
                     : kind == "root" ? "Reduce(1000 x int32, sum, root 0)"
                                      : "AllReduce(1000 x int32, sum)";
  const char* theirs = kind == "count"  ? "AllReduce(2000 x int32, sum)"
                       : kind == "type" ? "AllReduce(1000 x float32, sum)"
                       : kind == "op"   ? "AllReduce(1000 x int32, max)"
                       : kind == "root" ? "Reduce(1000 x int32, sum, root 1)"
                                        : "a send of 4000 bytes from rank";
  EXPECT_NE(std::string::npos, text.find(mine)) << text;
  EXPECT_NE(std::string::npos, text.find(theirs)) << text;
}

INSTANTIATE_TEST_SUITE_P(Calls, KernelMismatch,
                         testing::Combine(testing::Values("count", "type", "op", "send", "root", "operation", "missing"),
                                          testing::Bool()),
                         [](const testing::TestParamInfo<std::tuple<const char*, bool>>& p) {
                           return std::string(std::get<0>(p.param)) + (std::get<1>(p.param) ? "ThroughTheProxy" : "");
                         });

// The same among 3 and 4 thread ranks on one device, the last rank's call differing (and two
// kinds where every rank's differs: broadcasts whose root each rank takes to be the next rank,
// or itself): only
// the ranks whose data crosses the mismatch see it; the others must learn it (frozen by the rank
// that saw it) before their next call returns (issue 27), and nobody may hang. Each rank then makes
// matched calls: each fails with ncclInvalidUsage or is exact, and the last is exact everywhere.
class KernelMismatchAmongMore : public testing::TestWithParam<std::tuple<const char*, bool, int>> {};

TEST_P(KernelMismatchAmongMore, EveryRankFailsByItsNextCallAndNoneHangs) {
  const std::string kind = std::get<0>(GetParam());
  const bool proxy = std::get<1>(GetParam());
  const int n = std::get<2>(GetParam());
  const std::string log = mismatchTestLog(proxy, "kmismatchn");
  REQUIRE_DRIVER(d);
  std::vector<std::string> problems(n), after(n);
  accl_test::Watchdog watchdog(n, 120);
  std::string error;
  bool ok = runThreadRanks(
      n, [](int) { useDevice(0); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        CUdeviceptr b = 0;
        watchdog.at(rank, "the matched all-reduce");
        problems[rank] = matchedAllReduceFirst(d, comm, rank, n, &s, &b);
        if (s == nullptr || b == 0) return;
        auto st = reinterpret_cast<cudaStream_t>(s);
        void* p = reinterpret_cast<void*>(b);
        const bool last = rank == n - 1;
        watchdog.at(rank, "the mismatched call");
        // Queued without an error: the mismatch shows once the kernels have run.
        if (kind == "send") {
          // A ring of sends: the last rank sends and receives 1000 elements, the others 500.
          const size_t count = last ? 1000 : 500;
          ncclGroupStart();
          ncclSend(p, count, ncclInt32, (rank + 1) % n, comm, st);
          ncclRecv(static_cast<int32_t*>(p) + 1000, count, ncclInt32, (rank + n - 1) % n, comm, st);
          ncclGroupEnd();
        } else if (kind == "root") {
          ncclReduce(p, p, 1000, ncclInt32, ncclSum, last ? n - 1 : 0, comm, st);
        } else if (kind == "rootcycle") {
          // Each rank takes the next for the broadcast's root: each waits for the next, nobody
          // sends, and (through the proxies) each notice reaches a rank that waits for another.
          ncclBroadcast(p, p, 1000, ncclInt32, (rank + 1) % n, comm, st);
        } else if (kind == "allroots") {
          // Each rank takes itself for the root: nobody receives in this call; the chunks it
          // left behind fail the next call on every rank.
          ncclBroadcast(p, p, 1000, ncclInt32, rank, comm, st);
        } else if (kind == "operation") {
          if (last) ncclBroadcast(p, p, 1000, ncclInt32, 0, comm, st);
          else ncclAllReduce(p, p, 1000, ncclInt32, ncclSum, comm, st);
        } else if (kind == "missing") {
          if (rank == 0) ncclBroadcast(p, p, 1000, ncclInt32, 0, comm, st);
          ncclAllReduce(p, p, 1000, ncclInt32, ncclSum, comm, st);
        } else {
          ncclAllReduce(p, p, last && kind == "count" ? 2000 : 1000, last && kind == "type" ? ncclFloat32 : ncclInt32,
                        last && kind == "op" ? ncclMax : ncclSum, comm, st);
        }
        EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(s)) << "the mismatched call did not end";
        watchdog.at(rank, "the matched calls after the mismatched one");
        // Where nobody received in the mismatched call (allroots) the first of them meets the
        // chunks left behind and fails; the call after realigns and fails; the third is exact.
        // A rank whose kernel ended before it learned of the mismatch (reduce roots: a rank that
        // only sends) may queue its first matched call before that: the call fails once run,
        // and its next call realigns. Calls pair up by number, so every rank then fails its
        // second call too. Ranks that lack rank 0's broadcast (missing) need one more call.
        int failures = 0;
        after[rank] = matchedAllReducesAfter(d, comm, rank, n, s, b, kind == "missing" && rank != 0 ? 4 : 3, &failures);
        if (after[rank].empty() && failures == 0) after[rank] = "no call failed after the mismatched one";
        watchdog.at(rank, "done");
        d->streamDestroy(s);
        d->memFree(b);
      },
      &error);
  const std::string text = takeMismatchTestLog(log);
  EXPECT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) {
    EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r] << "\n" << text;
    EXPECT_TRUE(after[r].empty()) << "rank " << r << ": " << after[r] << "\n" << text;
  }
  EXPECT_NE(std::string::npos, text.find("mismatched calls: rank")) << text;
  EXPECT_LE(n, accl_test::occurrences(text, "it realigned the collective streams after mismatched calls")) << text;
}

INSTANTIATE_TEST_SUITE_P(Calls, KernelMismatchAmongMore,
                         testing::Combine(testing::Values("count", "type", "op", "send", "root", "rootcycle", "allroots",
                                                          "operation", "missing"),
                                          testing::Bool(), testing::Values(3, 4)),
                         [](const testing::TestParamInfo<std::tuple<const char*, bool, int>>& p) {
                           return std::string(std::get<0>(p.param)) + (std::get<1>(p.param) ? "ThroughTheProxy" : "") +
                                  "On" + std::to_string(std::get<2>(p.param)) + "Ranks";
                         });

// A rank that destroys its communicator instead of making the call that realigns: the rank
// waiting to realign with it fails its call with ncclRemoteError, naming it, and does not hang.
TEST(CudaBackend, ARankThatDestroysItsFrozenCommunicatorEndsTheOthersRealignmentNamingIt) {
  for (const bool proxy : {false, true}) {
    SCOPED_TRACE(proxy ? "through the proxy" : "mailboxes");
    const std::string log = mismatchTestLog(proxy, "kgone");
    REQUIRE_DRIVER(d);
    std::vector<std::string> problems(2);
    ncclResult_t next = ncclSuccess, async = ncclSuccess;
    accl_test::Watchdog watchdog(2, 120);
    std::string error;
    bool ok = runThreadRanks(
        2, [](int) { useDevice(0); },
        [&](ncclComm_t comm, int rank) {
          CUstream s = nullptr;
          CUdeviceptr b = 0;
          problems[rank] = matchedAllReduceFirst(d, comm, rank, 2, &s, &b);
          if (s == nullptr || b == 0) return;
          auto st = reinterpret_cast<cudaStream_t>(s);
          void* p = reinterpret_cast<void*>(b);
          watchdog.at(rank, "the mismatched call");
          ncclAllReduce(p, p, rank == 0 ? 1000 : 2000, ncclInt32, ncclSum, comm, st);
          EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
          if (rank == 0) {
            watchdog.at(rank, "the call that realigns");
            next = ncclAllReduce(p, p, 1000, ncclInt32, ncclSum, comm, st);
            d->streamSynchronize(s);
            ncclCommGetAsyncError(comm, &async);
          }
          watchdog.at(rank, "done");  // rank 1 destroys its communicator now
          d->streamDestroy(s);
          d->memFree(b);
        },
        &error);
    const std::string text = takeMismatchTestLog(log);
    EXPECT_TRUE(ok) << error;
    for (int r = 0; r < 2; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
    EXPECT_EQ(ncclRemoteError, next) << text;
    EXPECT_EQ(ncclRemoteError, async) << text;
    EXPECT_NE(std::string::npos, text.find("rank 0: mismatched calls on the kernel path, and the collective streams "
                                           "could not be realigned: "))
        << text;
    // Its note says so; its bootstrap connection closing may tell first.
    EXPECT_TRUE(text.find("destroyed its communicator while waiting for") != std::string::npos ||
                text.find("rank 1 failed or left while waiting for") != std::string::npos)
        << text;
  }
}

// One rank: every collective is its own kernel launch on the user's stream (no gate, no
// worker): the whole matrix, PreMulSum and sends/receives to itself included, and no stream
// memory operation on the fake.
TEST(CudaBackend, MatrixOnOneRankRunsStraightOnTheUsersStream) {
  REQUIRE_DRIVER(d);
  accl_test::MatrixScope scope;
  const auto cases = accl_test::buildMatrix(1, scope);
  std::vector<std::string> messages;
  accl_test::Watchdog watchdog(1, 120);
  std::string error;
  unsigned long long memopsBefore = 0, memopsAfter = 0;
  bool ok = runThreadRanks(
      1,
      [&](ncclComm_t comm, int rank) {
        useDevice(0);
        DriverMatrixDevice dev(*d, false);
        ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr);  // nothing: count 0
        if (fakeCudaMemopRuns) memopsBefore = fakeCudaMemopRuns();
        messages = accl_test::runMatrixCases(comm, rank, 1, cases, &watchdog, false, &dev);
        if (fakeCudaMemopRuns) memopsAfter = fakeCudaMemopRuns();
      },
      &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_TRUE(messages.empty()) << accl_test::joinedLines(messages);
  if (fakeCudaMemopRuns) {
    EXPECT_EQ(memopsBefore, memopsAfter) << "a single-rank collective went through a gate";
  }
}

// Issue #41: one rank has no peer to wait for, so a collective is its input: out of place one
// device-to-device copy on the caller's stream, in place nothing at all; only ncclPreMulSum's
// scaling needs a kernel. Checked on the fake's call log (a real driver keeps none: results only).
TEST(CudaBackend, OneRankCollectiveIsOneCopyOutOfPlaceAndNothingInPlace) {
  REQUIRE_DRIVER(d);
  useDevice(0);
  ncclComm_t comm = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclSuccess, ncclCommInitAll(&comm, 1, &dev));
  CUstream s = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
  const size_t count = 1000;
  std::vector<int32_t> input(count), output(count);
  for (size_t i = 0; i < count; i++) input[i] = static_cast<int32_t>(i * 7) - 300;
  CUdeviceptr in = 0, out = 0;
  ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&in, count * 4));
  ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&out, count * 4));
  const bool logged = fakeCudaLogReset != nullptr;
  void* const inp = reinterpret_cast<void*>(in);
  void* const outp = reinterpret_cast<void*>(out);
  const cudaStream_t cs = reinterpret_cast<cudaStream_t>(s);
  using Call = std::function<ncclResult_t(const void*, void*)>;
  const std::vector<std::pair<const char*, Call>> calls = {
      {"all-reduce sum", [&](const void* a, void* b) { return ncclAllReduce(a, b, count, ncclInt32, ncclSum, comm, cs); }},
      {"all-reduce avg", [&](const void* a, void* b) { return ncclAllReduce(a, b, count, ncclInt32, ncclAvg, comm, cs); }},
      {"all-reduce max", [&](const void* a, void* b) { return ncclAllReduce(a, b, count, ncclInt32, ncclMax, comm, cs); }},
      {"broadcast", [&](const void* a, void* b) { return ncclBroadcast(a, b, count, ncclInt32, 0, comm, cs); }},
      {"reduce", [&](const void* a, void* b) { return ncclReduce(a, b, count, ncclInt32, ncclProd, 0, comm, cs); }},
      {"all-gather", [&](const void* a, void* b) { return ncclAllGather(a, b, count, ncclInt32, comm, cs); }},
      {"reduce-scatter", [&](const void* a, void* b) { return ncclReduceScatter(a, b, count, ncclInt32, ncclSum, comm, cs); }},
      {"all-to-all", [&](const void* a, void* b) { return ncclAlltoAll(a, b, count, ncclInt32, comm, cs); }},
  };
  for (const auto& [what, call] : calls) {
    ASSERT_EQ(CUDA_SUCCESS, d->memcpyHtoD(in, input.data(), count * 4));
    std::vector<int32_t> zeros(count, 0);
    ASSERT_EQ(CUDA_SUCCESS, d->memcpyHtoD(out, zeros.data(), count * 4));
    if (logged) fakeCudaLogReset();
    ASSERT_EQ(ncclSuccess, call(inp, outp)) << what;
    if (logged) {
      EXPECT_EQ(0u, fakeCudaQueued(FAKE_CUDA_QUEUED_LAUNCH)) << what;
      EXPECT_EQ(0u, fakeCudaQueued(FAKE_CUDA_QUEUED_MEMSET)) << what;
      EXPECT_EQ(0u, fakeCudaQueued(FAKE_CUDA_QUEUED_EVENT_RECORD)) << what;
      EXPECT_EQ(0u, fakeCudaQueued(FAKE_CUDA_QUEUED_STREAM_WAIT)) << what;
      EXPECT_EQ(0u, fakeCudaQueued(FAKE_CUDA_QUEUED_MEMOP)) << what;
      ASSERT_EQ(1u, fakeCudaQueued(FAKE_CUDA_QUEUED_MEMCPY)) << what;
      FakeCudaCopy c{};
      ASSERT_EQ(0, fakeCudaCopyAt(0, &c));
      EXPECT_EQ(FAKE_CUDA_DEVICE_TO_DEVICE, c.direction) << what;
      EXPECT_EQ(1, c.async) << what;
      EXPECT_EQ(count * 4, c.bytes) << what;
      EXPECT_EQ(0u, fakeCudaDriverCalls("cuEventCreate")) << what;
      EXPECT_EQ(0u, fakeCudaDriverCalls("cuMemAlloc")) << what;
    }
    ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
    ASSERT_EQ(CUDA_SUCCESS, d->memcpyDtoH(output.data(), out, count * 4));
    EXPECT_EQ(input, output) << what << " out of place";

    if (logged) fakeCudaLogReset();
    ASSERT_EQ(ncclSuccess, call(inp, inp)) << what << " in place";
    if (logged) {
      for (int k = 0; k < FAKE_CUDA_QUEUED_KINDS; k++) EXPECT_EQ(0u, fakeCudaQueued(k)) << what << " in place, kind " << k;
    }
    ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
    ASSERT_EQ(CUDA_SUCCESS, d->memcpyDtoH(output.data(), in, count * 4));
    EXPECT_EQ(input, output) << what << " in place";
  }

  // Scaling is the one thing that needs the kernel: one launch, and exact products.
  int32_t factor = 3;
  ncclRedOp_t preMul;
  ASSERT_EQ(ncclSuccess, ncclRedOpCreatePreMulSum(&preMul, &factor, ncclInt32, ncclScalarHostImmediate, comm));
  ASSERT_EQ(CUDA_SUCCESS, d->memcpyHtoD(in, input.data(), count * 4));
  if (logged) fakeCudaLogReset();
  ASSERT_EQ(ncclSuccess, ncclAllReduce(inp, outp, count, ncclInt32, preMul, comm, cs));
  if (logged) {
    EXPECT_EQ(1u, fakeCudaQueued(FAKE_CUDA_QUEUED_LAUNCH));
    EXPECT_EQ(0u, fakeCudaQueued(FAKE_CUDA_QUEUED_MEMCPY));
  }
  ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
  ASSERT_EQ(CUDA_SUCCESS, d->memcpyDtoH(output.data(), out, count * 4));
  for (size_t i = 0; i < count; i++) ASSERT_EQ(input[i] * 3, output[i]) << i;
  EXPECT_EQ(ncclSuccess, ncclRedOpDestroy(preMul, comm));

  EXPECT_EQ(ncclSuccess, ncclCommDestroy(comm));
  EXPECT_EQ(CUDA_SUCCESS, d->memFree(in));
  EXPECT_EQ(CUDA_SUCCESS, d->memFree(out));
  EXPECT_EQ(CUDA_SUCCESS, d->streamDestroy(s));
}

// A child process's part of the multi-process matrix tests: every case on device buffers.
void runMatrixInChild(const accl_test::ChildRole& role) {
  CHILD_RANK(role, d, comm);
  DriverMatrixDevice dev(*d, false);
  accl_test::Watchdog watchdog(role.nranks, 120);
  auto cases = accl_test::buildMatrix(role.nranks, accl_test::MatrixScope{});
  auto messages = accl_test::runMatrixCases(comm, role.rank, role.nranks, cases, &watchdog, false, &dev);
  EXPECT_TRUE(messages.empty()) << accl_test::joinedLines(messages);
  EXPECT_EQ(ncclSuccess, ncclCommDestroy(comm));
}

TEST(CudaBackend, MatrixOnThreeProcessesOnOneDevice) {
  if (const accl_test::ChildRole* role = accl_test::childRole()) return runMatrixInChild(*role);
  REQUIRE_DRIVER(d);
  auto r = accl_test::runChildProcesses(3, true, 0, {}, 300);
  EXPECT_TRUE(r.ok) << r.report;
}

// A stream held back by a flag the test controls: the call must return at once, write nothing
// until the stream gets there, and be complete when the stream is synchronised.
struct HeldStream {
  const TestDriver& d;
  CUstream stream = nullptr;
  volatile uint64_t* flag = nullptr;
  explicit HeldStream(const TestDriver& drv) : d(drv) {
    void* p = nullptr;
    d.memHostAlloc(&p, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    flag = static_cast<volatile uint64_t*>(p);
    *flag = 0;
    CUdeviceptr dp = 0;
    d.memHostGetDevicePointer(&dp, p, 0);
    d.streamCreate(&stream, CU_STREAM_NON_BLOCKING);
    d.streamWaitValue64(stream, dp, 1, CU_STREAM_WAIT_VALUE_GEQ);
  }
  void release() { *flag = 1; }
  ~HeldStream() {
    release();
    d.streamSynchronize(stream);
    d.streamDestroy(stream);
    d.memFreeHost(const_cast<uint64_t*>(flag));
  }
};

TEST(CudaBackend, CallReturnsAtOnceAndTheStreamCarriesTheResult) {
  REQUIRE_DRIVER(d);
  const int n = 2;
  const size_t count = 1 << 16;
  std::vector<int> failures(n, 0);
  std::string error;
  bool ok = runThreadRanks(
      n,
      [&](ncclComm_t comm, int rank) {
        useDevice(0);
        std::vector<float> host(count, static_cast<float>(rank + 1)), out(count, -1.0f);
        CUdeviceptr in = 0, res = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&in, count * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&res, count * 4));
        d->memcpyHtoD(in, host.data(), count * 4);
        d->memcpyHtoD(res, out.data(), count * 4);
        {
          HeldStream held(*d);
          auto t0 = std::chrono::steady_clock::now();
          ASSERT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(in), reinterpret_cast<void*>(res), count,
                                               ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(held.stream)));
          EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << "the call waited for the stream";
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          EXPECT_EQ(CUDA_ERROR_NOT_READY, d->streamQuery(held.stream));
          d->memcpyDtoH(out.data(), res, count * 4);
          EXPECT_EQ(-1.0f, out[0]) << "the result was written before the stream reached the call";
          held.release();
          ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(held.stream));
        }
        d->memcpyDtoH(out.data(), res, count * 4);
        for (size_t i = 0; i < count; i++)
          if (out[i] != 3.0f) failures[rank]++;
        d->memFree(in);
        d->memFree(res);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_EQ(0, failures[r]) << "rank " << r;
}

// Since CUDA 12.2 the first lookup of a kernel may synchronise the context; done during a
// collective, while a user's stream waits for it, that deadlocks. Every kernel is resolved when
// the device is set up, so collectives of every type and op look nothing up.
TEST(CudaBackend, KernelsAreResolvedAtSetUpNotDuringACollective) {
  REQUIRE_DRIVER(d);
  if (fakeCudaFunctionLookups == nullptr) GTEST_SKIP() << "SKIP: only the fake driver counts kernel lookups";
  const int n = 2;
  const size_t count = 1000;
  std::vector<unsigned long long> before(n), after(n);
  std::vector<int> wrong(n, 0);
  std::string error;
  bool ok = runThreadRanks(
      n,
      [&](ncclComm_t comm, int rank) {
        useDevice(0);
        before[rank] = fakeCudaFunctionLookups();
        CUstream st = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&st, CU_STREAM_NON_BLOCKING));
        CUdeviceptr buf = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&buf, count * 8));
        for (int t = 0; t < ncclNumTypes; t++)
          for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg})
            ASSERT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf), reinterpret_cast<void*>(buf), count,
                                                 static_cast<ncclDataType_t>(t), op, comm,
                                                 reinterpret_cast<cudaStream_t>(st)));
        // And a result that shows the kernels ran: int32 max of (rank + 1) is n. The upload waits
        // for the stream: a synchronous copy does not order itself after a non-blocking stream.
        ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(st));
        std::vector<int32_t> host(count, rank + 1);
        d->memcpyHtoD(buf, host.data(), count * 4);
        ASSERT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf), reinterpret_cast<void*>(buf), count,
                                             ncclInt32, ncclMax, comm, reinterpret_cast<cudaStream_t>(st)));
        ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(st));
        d->memcpyDtoH(host.data(), buf, count * 4);
        for (int32_t v : host) wrong[rank] += v != n;
        after[rank] = fakeCudaFunctionLookups();
        d->memFree(buf);
        d->streamDestroy(st);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(0, wrong[r]) << "rank " << r;
    EXPECT_EQ(before[r], after[r]) << "rank " << r << " looked kernels up during its collectives";
    // Reduce and collective (4 ops each), scale and divide per datatype, plus copy and staged.
    EXPECT_GE(before[r], static_cast<unsigned long long>(ncclNumTypes) * 10 + 2) << "not every kernel was resolved at set-up";
  }
}

// CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron-LM sets it) gives every stream of the device one
// hardware queue. Two ranks of one process on one device run kernels that wait for each other;
// in one queue one can sit behind the other and never start (co-scheduling cannot be
// guaranteed), so the communicator is refused at init, naming the setting; a lone rank runs.
TEST(CudaBackend, OneHardwareQueueIsRefusedAtInitNamingTheSettingInsteadOfHanging) {
  REQUIRE_DRIVER(d);
  (void)d;
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  std::vector<ncclResult_t> result(2, ncclSuccess);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; r++)
    ranks.emplace_back([&, r] {
      useDevice(0);
      ncclComm_t comm = nullptr;
      result[r] = ncclCommInitRank(&comm, 2, id, r);
      if (result[r] == ncclSuccess) ncclCommDestroy(comm);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; r++) EXPECT_EQ(ncclInvalidUsage, result[r]) << "rank " << r;
  EXPECT_NE(std::string::npos, std::string(ncclGetLastError(nullptr)).find("CUDA_DEVICE_MAX_CONNECTIONS=1"))
      << ncclGetLastError(nullptr);
  ncclComm_t lone = nullptr;
  int dev = 0;
  EXPECT_EQ(ncclSuccess, ncclCommInitAll(&lone, 1, &dev));
  if (lone) ncclCommDestroy(lone);
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
}

TEST(CudaBackend, CapturedAllReduceReplaysWithNewInputsEveryTime) {
  REQUIRE_DRIVER(d);
  const int n = 2;
  const size_t count = 4099;
  std::vector<std::string> problems(n);
  std::string error;
  bool ok = runThreadRanks(
      n,
      [&](ncclComm_t comm, int rank) {
        useDevice(0);
        CUstream s = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        CUdeviceptr in = 0, out = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&in, count * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&out, count * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->streamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        ASSERT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(in), reinterpret_cast<void*>(out), count,
                                             ncclInt32, ncclSum, comm, reinterpret_cast<cudaStream_t>(s)));
        CUgraph graph = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->streamEndCapture(s, &graph));
        CUgraphExec exec = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->graphInstantiate(&exec, graph, 0));
        for (int replay = 0; replay < 3; replay++) {
          std::vector<int32_t> host(count);
          for (size_t i = 0; i < count; i++) host[i] = static_cast<int32_t>(i * (rank + 1) + replay * 1000);
          d->memcpyHtoD(in, host.data(), count * 4);
          ASSERT_EQ(CUDA_SUCCESS, d->graphLaunch(exec, s));
          ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
          d->memcpyDtoH(host.data(), out, count * 4);
          for (size_t i = 0; i < count; i++) {
            int32_t want = static_cast<int32_t>(i * 3 + replay * 2000);  // ranks 1 and 2 times i
            if (host[i] != want) {
              problems[rank] += "replay " + std::to_string(replay) + " element " + std::to_string(i) + ": got " +
                                std::to_string(host[i]) + " want " + std::to_string(want) + "\n";
              break;
            }
          }
        }
        d->graphExecDestroy(exec);
        d->graphDestroy(graph);
        d->memFree(in);
        d->memFree(out);
        d->streamDestroy(s);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(problems[r].empty()) << problems[r];
}

// ACCL_DETERMINISTIC=1 promises the host backend's bits: every element folded in rank order,
// rounded after each step. The kernel always folds that way, so a float sum of values of very
// different magnitudes on 3 ranks (one device) and on 2 ranks (two devices) must equal
// ((x0 + x1) + x2) computed in float on the host, bit for bit, in both all-reduce forms (whole
// inputs below 256 KiB, slices above) and in reduce-scatter.
void expectRankOrderBits(int n, bool ownDevices) {
  setenv("FAKE_CUDA_DEVICES", "4", 0);
  REQUIRE_DRIVER(d);
  int devices = 0;
  d->deviceGetCount(&devices);
  if (ownDevices && devices < n) GTEST_SKIP() << "SKIP: needs " << n << " CUDA devices, this machine has " << devices;
  const size_t counts[] = {1000, 200000};
  std::vector<std::string> problems(n);
  auto value = [](int r, size_t i) {
    uint32_t h = static_cast<uint32_t>(i * 2654435761u) ^ static_cast<uint32_t>(r * 40503u);
    const float mag[] = {1e-3f, 1.0f, 3e4f};
    return (static_cast<float>(h % 100000) / 7.0f - 7000.0f) * mag[(h >> 20) % 3];
  };
  std::string error;
  bool ok = runThreadRanks(
      n, [&](int rank) { useDevice(ownDevices ? rank : 0); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        // Every buffer up front, freed at the end: cuMemFree waits for the whole device, where
        // another rank's kernel may be waiting for this rank's next collective.
        std::vector<CUdeviceptr> buffers;
        for (size_t count : counts)
          for (size_t bytes : {count * 4, count * 4, count / n * 4 + 4}) {
            CUdeviceptr b = 0;
            ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&b, bytes));
            buffers.push_back(b);
          }
        size_t next = 0;
        for (size_t count : counts) {
          const CUdeviceptr in = buffers[next], out = buffers[next + 1], rsOut = buffers[next + 2];
          next += 3;
          std::vector<float> host(count);
          for (size_t i = 0; i < count; i++) host[i] = value(rank, i);
          d->memcpyHtoD(in, host.data(), count * 4);
          auto cs = reinterpret_cast<cudaStream_t>(s);
          EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(in), reinterpret_cast<void*>(out), count,
                                               ncclFloat32, ncclSum, comm, cs));
          EXPECT_EQ(ncclSuccess, ncclReduceScatter(reinterpret_cast<void*>(in), reinterpret_cast<void*>(rsOut),
                                                   count / n, ncclFloat32, ncclSum, comm, cs));
          ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
          std::vector<float> got(count), rs(count / n);
          d->memcpyDtoH(got.data(), out, count * 4);
          d->memcpyDtoH(rs.data(), rsOut, count / n * 4);
          auto folded = [&](size_t i) {
            float acc = value(0, i);
            for (int r = 1; r < n; r++) acc = acc + value(r, i);
            return acc;
          };
          for (size_t i = 0; i < count && problems[rank].empty(); i++)
            if (std::memcmp(&got[i], &(const float&)folded(i), 4) != 0)
              problems[rank] = "all-reduce of " + std::to_string(count) + ": element " + std::to_string(i) +
                               " is not the rank-order sum";
          for (size_t i = 0; i < count / n && problems[rank].empty(); i++)
            if (std::memcmp(&rs[i], &(const float&)folded(rank * (count / n) + i), 4) != 0)
              problems[rank] = "reduce-scatter of " + std::to_string(count) + ": element " + std::to_string(i) +
                               " is not the rank-order sum";
        }
        for (CUdeviceptr b : buffers) d->memFree(b);
        d->streamDestroy(s);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
}

TEST(CudaBackend, SumsAreTheRankOrderBitsOnThreeRanksOfOneDevice) { expectRankOrderBits(3, false); }
TEST(CudaBackend, SumsAreTheRankOrderBitsOnTwoDevices) { expectRankOrderBits(2, true); }

// NCCL's execution model under every capture mode (PyTorch captures in global mode, nccl-tests
// -G in thread-local): an all-reduce (large enough to reduce a slice per rank and gather), a
// reduce-scatter and a send/recv pair captured in one graph on each of two ranks, each on its
// own device with one hardware queue, replayed with new inputs; every replay exact. Nothing in
// the capture allocates, registers or loads, so no mode invalidates it. OverSockets: with
// NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 the ranks' kernels reach each other only through
// their network proxies over sockets, which must carry every replay's chunks too.
class CapturedCollectives : public testing::TestWithParam<std::tuple<CUstreamCaptureMode, bool>> {};

TEST_P(CapturedCollectives, ReplayExactlyWithNewInputsOnTwoDevicesWithOneHardwareQueue) {
  setenv("FAKE_CUDA_DEVICES", "4", 0);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  const CUstreamCaptureMode mode = std::get<0>(GetParam());
  const bool overSockets = std::get<1>(GetParam());
  if (overSockets) {
    setenv("NCCL_P2P_DISABLE", "1", 1);
    setenv("NCCL_SHM_DISABLE", "1", 1);
  }
  REQUIRE_DRIVER(d);
  int devices = 0;
  d->deviceGetCount(&devices);
  if (devices < 2) GTEST_SKIP() << "SKIP: needs 2 CUDA devices, this machine has " << devices;
  const int n = 2;
  const size_t arCount = 300000, rsCount = 70000, p2pCount = 50000;
  std::vector<std::string> problems(n);
  std::barrier<> meet(n);
  std::string error;
  bool ok = runThreadRanks(
      n, [](int rank) { useDevice(rank); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        CUdeviceptr arIn = 0, arOut = 0, rsIn = 0, rsOut = 0, pIn = 0, pOut = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&arIn, arCount * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&arOut, arCount * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&rsIn, rsCount * n * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&rsOut, rsCount * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&pIn, p2pCount * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&pOut, p2pCount * 4));
        auto ptr = [](CUdeviceptr p) { return reinterpret_cast<void*>(p); };
        auto cs = reinterpret_cast<cudaStream_t>(s);
        meet.arrive_and_wait();  // nobody allocates while the other rank captures
        ASSERT_EQ(CUDA_SUCCESS, d->streamBeginCapture(s, mode));
        EXPECT_EQ(ncclSuccess, ncclAllReduce(ptr(arIn), ptr(arOut), arCount, ncclInt32, ncclSum, comm, cs));
        EXPECT_EQ(ncclSuccess, ncclReduceScatter(ptr(rsIn), ptr(rsOut), rsCount, ncclInt32, ncclMax, comm, cs));
        EXPECT_EQ(ncclSuccess, ncclGroupStart());
        EXPECT_EQ(ncclSuccess, ncclSend(ptr(pIn), p2pCount, ncclInt32, 1 - rank, comm, cs));
        EXPECT_EQ(ncclSuccess, ncclRecv(ptr(pOut), p2pCount, ncclInt32, 1 - rank, comm, cs));
        EXPECT_EQ(ncclSuccess, ncclGroupEnd());
        CUgraph graph = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->streamEndCapture(s, &graph)) << "the capture was invalidated";
        meet.arrive_and_wait();
        CUgraphExec exec = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->graphInstantiate(&exec, graph, 0));
        auto value = [](int r, size_t i, int replay) { return static_cast<int32_t>((i % 1000) * (r + 1) + replay * 7); };
        for (int replay = 0; replay < 4; replay++) {
          std::vector<int32_t> ar(arCount), rs(rsCount * n), p(p2pCount);
          for (size_t i = 0; i < ar.size(); i++) ar[i] = value(rank, i, replay);
          for (size_t i = 0; i < rs.size(); i++) rs[i] = value(rank, i + 3, replay);
          for (size_t i = 0; i < p.size(); i++) p[i] = value(rank, i + 5, replay);
          d->memcpyHtoD(arIn, ar.data(), ar.size() * 4);
          d->memcpyHtoD(rsIn, rs.data(), rs.size() * 4);
          d->memcpyHtoD(pIn, p.data(), p.size() * 4);
          meet.arrive_and_wait();  // both ranks' inputs are in place before either replays
          ASSERT_EQ(CUDA_SUCCESS, d->graphLaunch(exec, s));
          ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
          d->memcpyDtoH(ar.data(), arOut, ar.size() * 4);
          d->memcpyDtoH(rs.data(), rsOut, rsCount * 4);
          d->memcpyDtoH(p.data(), pOut, p.size() * 4);
          std::string& bad = problems[rank];
          for (size_t i = 0; i < arCount && bad.empty(); i++)
            if (ar[i] != value(0, i, replay) + value(1, i, replay))
              bad = "replay " + std::to_string(replay) + ": all-reduce element " + std::to_string(i) + " wrong";
          for (size_t i = 0; i < rsCount && bad.empty(); i++) {
            const size_t at = rank * rsCount + i + 3;
            if (rs[i] != std::max(value(0, at, replay), value(1, at, replay)))
              bad = "replay " + std::to_string(replay) + ": reduce-scatter element " + std::to_string(i) + " wrong";
          }
          for (size_t i = 0; i < p2pCount && bad.empty(); i++)
            if (p[i] != value(1 - rank, i + 5, replay))
              bad = "replay " + std::to_string(replay) + ": received element " + std::to_string(i) + " wrong";
          meet.arrive_and_wait();  // both replays done before the inputs change
        }
        d->graphExecDestroy(exec);
        d->graphDestroy(graph);
        for (CUdeviceptr b : {arIn, arOut, rsIn, rsOut, pIn, pOut}) d->memFree(b);
        d->streamDestroy(s);
      },
      &error);
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  unsetenv("NCCL_P2P_DISABLE");
  unsetenv("NCCL_SHM_DISABLE");
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
}

INSTANTIATE_TEST_SUITE_P(EveryMode, CapturedCollectives,
                         testing::Combine(testing::Values(CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                          CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                          CU_STREAM_CAPTURE_MODE_RELAXED),
                                          testing::Bool()),
                         [](const testing::TestParamInfo<std::tuple<CUstreamCaptureMode, bool>>& p) {
                           const CUstreamCaptureMode m = std::get<0>(p.param);
                           return std::string(m == CU_STREAM_CAPTURE_MODE_GLOBAL         ? "Global"
                                              : m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? "ThreadLocal"
                                                                                         : "Relaxed") +
                                  (std::get<1>(p.param) ? "OverSockets" : "");
                         });

// nccl-tests -g N: one thread drives every rank of a group on one stream. The ranks' kernels
// must go into the same launches, not one after the other (which would wait forever).
TEST(CudaBackend, OneThreadDrivesTwoRanksOnTheNullStreamInOneGroup) {
  REQUIRE_DRIVER(d);
  ncclComm_t comms[2] = {nullptr, nullptr};
  int devs[2] = {0, 0};
  ASSERT_EQ(ncclSuccess, ncclCommInitAll(comms, 2, devs));
  const size_t count = 1000;
  CUdeviceptr buf[2] = {0, 0};
  for (int r = 0; r < 2; r++) {
    ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&buf[r], count * 8));
    std::vector<double> v(count, r + 0.5);
    d->memcpyHtoD(buf[r], v.data(), count * 8);
  }
  for (int iter = 0; iter < 3; iter++) {
    ASSERT_EQ(ncclSuccess, ncclGroupStart());
    for (int r = 0; r < 2; r++)
      ASSERT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf[r]), reinterpret_cast<void*>(buf[r]), count,
                                           ncclFloat64, ncclSum, comms[r], nullptr));
    ASSERT_EQ(ncclSuccess, ncclGroupEnd());
  }
  ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(nullptr));
  for (int r = 0; r < 2; r++) {
    std::vector<double> v(count);
    d->memcpyDtoH(v.data(), buf[r], count * 8);
    EXPECT_EQ(8.0, v[0]) << "rank " << r;  // 0.5 + 1.5 = 2, doubled twice more
    EXPECT_EQ(8.0, v[count - 1]) << "rank " << r;
    d->memFree(buf[r]);
  }
  for (auto c : comms) EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
}

// nccl-tests -g 8: one thread drives eight ranks, each on its own device and stream, in one
// group. Each rank's kernel goes on its own stream (one launch for all of them would need 176
// blocks' worth of tasks in one argument block, and puts every rank's work on one device).
// Small (every rank folds everything) and large (a slice each, then gathered) all-reduces,
// in place, three times over, every element checked.
TEST(CudaBackend, OneThreadDrivesEightRanksOnTheirOwnDevicesAndStreamsInOneGroup) {
  setenv("FAKE_CUDA_DEVICES", "8", 0);
  REQUIRE_DRIVER(d);
  constexpr int n = 8;
  int devices = 0;
  d->deviceGetCount(&devices);
  if (devices < n) GTEST_SKIP() << "SKIP: needs 8 CUDA devices, this machine has " << devices;
  ncclComm_t comms[n] = {};
  int devs[n];
  for (int r = 0; r < n; r++) devs[r] = r;
  ASSERT_EQ(ncclSuccess, ncclCommInitAll(comms, n, devs));
  CUstream st[n] = {};
  for (int r = 0; r < n; r++) {
    useDevice(r);
    ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&st[r], CU_STREAM_NON_BLOCKING));
  }
  groupAllReducesAreExact(*d, comms, devs, st, n);
  for (int r = 0; r < n; r++) d->streamDestroy(st[r]);
  for (auto c : comms) EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
}

// Waits up to `seconds` for `s` to finish its work; false when it is still busy then.
bool streamFinishes(const TestDriver& d, CUstream s, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (d.streamQuery(s) == CUDA_ERROR_NOT_READY) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Two threads driving two ranks of one communicator on one device, both on the NULL stream:
// the rank queued second would sit behind the first, which waits for it. The second call is
// refused (ncclInvalidUsage) instead of hanging, and the rank can then use a stream of its own.
TEST(CudaBackend, RanksOfTwoThreadsOnTheNullStreamAreRefusedNotHung) {
  REQUIRE_DRIVER(d);
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  const size_t count = 1000;
  ncclComm_t comms[2] = {nullptr, nullptr};
  CUdeviceptr buf[2] = {0, 0};
  std::atomic<int> phase{0}, uploaded{0};
  ncclResult_t second = ncclSuccess;
  bool finished[2] = {false, false};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; rank++) {
    threads.emplace_back([&, rank] {
      useDevice(0);
      if (ncclCommInitRank(&comms[rank], 2, id, rank) != ncclSuccess) return;
      d->memAlloc(&buf[rank], count * 8);
      std::vector<double> v(count, rank + 0.5);
      d->memcpyHtoD(buf[rank], v.data(), count * 8);  // synchronous: before anything is queued
      uploaded++;
      while (uploaded.load() < 2) std::this_thread::yield();
      void* p = reinterpret_cast<void*>(buf[rank]);
      if (rank == 0) {
        EXPECT_EQ(ncclSuccess, ncclAllReduce(p, p, count, ncclFloat64, ncclSum, comms[0], nullptr));
        phase = 1;
        while (phase.load() < 2) std::this_thread::yield();
        finished[0] = streamFinishes(*d, nullptr, 30);
        return;
      }
      while (phase.load() < 1) std::this_thread::yield();
      second = ncclAllReduce(p, p, count, ncclFloat64, ncclSum, comms[1], nullptr);
      if (second == ncclInvalidUsage) {
        CUstream own = nullptr;
        d->streamCreate(&own, CU_STREAM_NON_BLOCKING);
        EXPECT_EQ(ncclSuccess, ncclAllReduce(p, p, count, ncclFloat64, ncclSum, comms[1],
                                             reinterpret_cast<cudaStream_t>(own)));
        finished[1] = streamFinishes(*d, own, 30);
        d->streamDestroy(own);
      }
      phase = 2;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ncclInvalidUsage, second) << "the second rank's call on the shared NULL stream was queued";
  for (int r = 0; r < 2; r++) {
    ASSERT_NE(nullptr, comms[r]) << "rank " << r << ": init failed";
    if (second != ncclInvalidUsage || !finished[0] || !finished[1]) {
      EXPECT_EQ(ncclSuccess, ncclCommAbort(comms[r]));  // lets the deadlocked stream pass
      continue;
    }
    std::vector<double> v(count);
    d->memcpyDtoH(v.data(), buf[r], count * 8);
    EXPECT_EQ(2.0, v[0]) << "rank " << r;
    EXPECT_EQ(2.0, v[count - 1]) << "rank " << r;
  }
  // Once rank 0's collective has run, the NULL stream is free for rank 1 (the claim ended).
  if (second == ncclInvalidUsage && finished[0] && finished[1]) {
    threads.clear();
    for (int rank = 0; rank < 2; rank++) {
      threads.emplace_back([&, rank] {
        useDevice(0);
        CUstream own = nullptr;
        if (rank == 0) d->streamCreate(&own, CU_STREAM_NON_BLOCKING);
        void* p = reinterpret_cast<void*>(buf[rank]);
        EXPECT_EQ(ncclSuccess, ncclAllReduce(p, p, count, ncclFloat64, ncclSum, comms[rank],
                                             reinterpret_cast<cudaStream_t>(own)))
            << "rank " << rank;
        EXPECT_TRUE(streamFinishes(*d, own, 30)) << "rank " << rank;
        if (own) d->streamDestroy(own);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; r++) {
      std::vector<double> v(count);
      d->memcpyDtoH(v.data(), buf[r], count * 8);
      EXPECT_EQ(4.0, v[0]) << "rank " << r;
      EXPECT_EQ(ncclSuccess, ncclCommDestroy(comms[r]));
    }
  }
  EXPECT_TRUE(finished[0] && finished[1]) << "a rank's stream did not finish within 30 s";
  streamFinishes(*d, nullptr, 30);
  for (CUdeviceptr b : buf) d->memFree(b);
}

// Non-blocking init on a CUDA device, then one group mixing a collective with sends and
// receives, on device buffers and the rank's own stream.
TEST(CudaBackend, NonBlockingInitThenAGroupMixingAllReduceAndSendRecv) {
  REQUIRE_DRIVER(d);
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  const int n = 2;
  const size_t count = 3001;
  std::vector<std::string> problems(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; rank++) {
    threads.emplace_back([&, rank] {
      useDevice(0);
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclComm_t comm = nullptr;
      ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, rank, &config);
      if (r != ncclSuccess && r != ncclInProgress) {
        problems[rank] = std::string("init: ") + ncclGetErrorString(r);
        return;
      }
      ncclResult_t state = ncclInProgress;
      while (state == ncclInProgress) ncclCommGetAsyncError(comm, &state);
      if (state != ncclSuccess) {
        problems[rank] = std::string("async init: ") + ncclGetErrorString(state);
        return;
      }
      CUstream s = nullptr;
      d->streamCreate(&s, CU_STREAM_NON_BLOCKING);
      CUdeviceptr red = 0, snd = 0, rcv = 0;
      d->memAlloc(&red, count * 4);
      d->memAlloc(&snd, count * 4);
      d->memAlloc(&rcv, count * 4);
      std::vector<int32_t> v(count);
      for (size_t i = 0; i < count; i++) v[i] = static_cast<int32_t>(i + rank);
      d->memcpyHtoD(red, v.data(), count * 4);
      for (size_t i = 0; i < count; i++) v[i] = static_cast<int32_t>(1000 * rank + i);
      d->memcpyHtoD(snd, v.data(), count * 4);
      const int peer = 1 - rank;
      ncclGroupStart();
      ncclAllReduce(reinterpret_cast<void*>(red), reinterpret_cast<void*>(red), count, ncclInt32, ncclSum, comm,
                    reinterpret_cast<cudaStream_t>(s));
      ncclSend(reinterpret_cast<void*>(snd), count, ncclInt32, peer, comm, reinterpret_cast<cudaStream_t>(s));
      ncclRecv(reinterpret_cast<void*>(rcv), count, ncclInt32, peer, comm, reinterpret_cast<cudaStream_t>(s));
      r = ncclGroupEnd();
      while (r == ncclInProgress) {  // non-blocking communicators may answer ncclInProgress
        ncclCommGetAsyncError(comm, &r);
      }
      if (r != ncclSuccess) problems[rank] += std::string("group: ") + ncclGetErrorString(r) + "\n";
      if (d->streamSynchronize(s) != CUDA_SUCCESS) problems[rank] += "stream sync failed\n";
      d->memcpyDtoH(v.data(), red, count * 4);
      for (size_t i = 0; i < count; i++)
        if (v[i] != static_cast<int32_t>(2 * i + 1)) {
          problems[rank] += "all-reduce element " + std::to_string(i) + " = " + std::to_string(v[i]) + "\n";
          break;
        }
      d->memcpyDtoH(v.data(), rcv, count * 4);
      for (size_t i = 0; i < count; i++)
        if (v[i] != static_cast<int32_t>(1000 * peer + i)) {
          problems[rank] += "received element " + std::to_string(i) + " = " + std::to_string(v[i]) + "\n";
          break;
        }
      d->memFree(red);
      d->memFree(snd);
      d->memFree(rcv);
      d->streamDestroy(s);
      ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
}

using accl_test::readFile;
using accl_test::occurrences;

using accl_test::childLogEnv;
using accl_test::childLogPath;
using accl_test::takeChildLogs;

// Two ranks of one process on one device (ncclCommInitAll), one grouped all-reduce of `count`
// doubles, each rank's buffer 0.5 and 1.5: checks every element is 2.0 and returns the
// communicators (the caller destroys them).
std::array<ncclComm_t, 2> allReduceOnTwoRanks(const TestDriver& d, size_t count) {
  std::array<ncclComm_t, 2> comms = {nullptr, nullptr};
  int devs[2] = {0, 0};
  EXPECT_EQ(ncclSuccess, ncclCommInitAll(comms.data(), 2, devs));
  CUdeviceptr buf[2] = {0, 0};
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(CUDA_SUCCESS, d.memAlloc(&buf[r], count * 8));
    std::vector<double> v(count, r + 0.5);
    d.memcpyHtoD(buf[r], v.data(), count * 8);
  }
  EXPECT_EQ(ncclSuccess, ncclGroupStart());
  for (int r = 0; r < 2; r++)
    EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf[r]), reinterpret_cast<void*>(buf[r]), count,
                                         ncclFloat64, ncclSum, comms[r], nullptr));
  EXPECT_EQ(ncclSuccess, ncclGroupEnd());
  EXPECT_EQ(CUDA_SUCCESS, d.streamSynchronize(nullptr));
  for (int r = 0; r < 2; r++) {
    std::vector<double> v(count);
    d.memcpyDtoH(v.data(), buf[r], count * 8);
    EXPECT_EQ(2.0, v[0]) << "rank " << r;
    EXPECT_EQ(2.0, v[count - 1]) << "rank " << r;
    d.memFree(buf[r]);
  }
  return comms;
}

// The same with INIT logging to a file: returns the log.
std::string allReduceOnTwoRanksLogged(const TestDriver& d, const char* p2pDisable) {
  const std::string path = testing::TempDir() + "accl_cuda_ipc_" + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
  if (p2pDisable) setenv("NCCL_P2P_DISABLE", p2pDisable, 1);
  // More than one ring's worth (NCCL_BUFFSIZE) per rank.
  for (ncclComm_t c : allReduceOnTwoRanks(d, 300000)) EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
  std::string text = readFile(path);
  unlink(path.c_str());
  return text;
}

// Ranks on one device run their collectives as kernels on the caller's stream, through each
// other's mailboxes (NCCL's execution model): no host-driven connection is made at all.
TEST(CudaIpc, RanksOnOneDeviceRunCollectivesAsKernelsThroughMailboxes) {
  REQUIRE_DRIVER(d);
  std::string log = allReduceOnTwoRanksLogged(*d, nullptr);
  EXPECT_EQ(2, occurrences(log, "collectives run as kernels on the caller's stream")) << log;
  EXPECT_EQ(0, occurrences(log, "via CUDA IPC")) << log;
  EXPECT_EQ(0, occurrences(log, "via SHM")) << log;
}

// NCCL_P2P_DISABLE=1: the kernels reach each other only through their network proxies, which
// carry the chunks over shared memory (host rings): still kernels on the caller's stream.
TEST(CudaIpc, P2pDisableSendsThroughTheNetworkProxyOverSharedMemory) {
  REQUIRE_DRIVER(d);
  std::string log = allReduceOnTwoRanksLogged(*d, "1");
  EXPECT_EQ(2, occurrences(log, "collectives run as kernels")) << log;
  EXPECT_EQ(1, occurrences(log, "network proxy for ranks 1 via SHM")) << log;
  EXPECT_EQ(1, occurrences(log, "network proxy for ranks 0 via SHM")) << log;
  EXPECT_EQ(4, occurrences(log, "via SHM")) << log;  // each rank's connection, and its proxy line
  EXPECT_EQ(0, occurrences(log, "via CUDA IPC")) << log;
}

// Processes on one device leaving at different times: a mailbox is freed only once every other
// process has unmapped it (the fake counts frees of memory another process still has open).
TEST(CudaIpc, AMailboxIsFreedOnlyAfterEveryProcessThatMappedItHasLetItGo) {
  if (const accl_test::ChildRole* role = accl_test::childRole()) {
    CHILD_RANK(*role, d, comm);
    const size_t count = 5000;
    CUdeviceptr buf = 0;
    ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&buf, count * 4));
    ASSERT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf), reinterpret_cast<void*>(buf), count,
                                         ncclFloat32, ncclSum, comm, nullptr));
    ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(nullptr));
    // Rank 0 leaves first, the others 300 ms later.
    if (role->rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(ncclSuccess, ncclCommDestroy(comm));
    if (fakeCudaFreesWhileOpen) {
      EXPECT_EQ(0ull, fakeCudaFreesWhileOpen()) << "rank " << role->rank << " freed memory another process had open";
    }
    d->memFree(buf);
    return;
  }
  REQUIRE_DRIVER(d);
  auto r = accl_test::runChildProcesses(3, true, 0, {}, 120);
  EXPECT_TRUE(r.ok) << r.report;
}

// Processes on one device: the handle is opened with cuIpcOpenMemHandle in the other process.
TEST(CudaIpc, ProcessesOnOneDeviceRunCollectivesAsKernelsThroughIpcMailboxes) {
  if (const accl_test::ChildRole* role = accl_test::childRole()) {
    CHILD_RANK(*role, d, comm);
    const size_t count = 300000;
    CUdeviceptr buf = 0;
    ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&buf, count * 8));
    std::vector<double> v(count, role->rank + 0.5);
    d->memcpyHtoD(buf, v.data(), count * 8);
    ASSERT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf), reinterpret_cast<void*>(buf), count,
                                         ncclFloat64, ncclSum, comm, nullptr));
    ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(nullptr));
    d->memcpyDtoH(v.data(), buf, count * 8);
    EXPECT_EQ(2.0, v[0]);
    EXPECT_EQ(2.0, v[count - 1]);
    EXPECT_EQ(ncclSuccess, ncclCommDestroy(comm));
    d->memFree(buf);
    return;
  }
  REQUIRE_DRIVER(d);
  const std::string path = childLogPath("accl_cuda_ipc_mp_");
  // Two processes on one device and no MPS control socket where the children look: each says
  // so once at init (issue #41). Then, with a control socket there, neither does.
  std::vector<std::string> env = childLogEnv(path);
  env.push_back("CUDA_MPS_PIPE_DIRECTORY=" + path + ".no-mps-here");
  auto r = accl_test::runChildProcesses(2, true, 0, env, 120);
  EXPECT_TRUE(r.ok) << r.report;
  const std::string log = takeChildLogs(path);
  EXPECT_EQ(2, occurrences(log, "collectives run as kernels on the caller's stream")) << log;
  EXPECT_EQ(2, occurrences(log, "no MPS server is seen")) << log;
  EXPECT_EQ(2, occurrences(log, "nvidia-cuda-mps-control -d")) << log;

  const std::string pipeDir = path + ".mps";
  ASSERT_EQ(0, mkdir(pipeDir.c_str(), 0700)) << pipeDir;
  const std::string control = pipeDir + "/control";
  int sock = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(control.size(), sizeof addr.sun_path) << control;
  std::memcpy(addr.sun_path, control.c_str(), control.size() + 1);
  ASSERT_EQ(0, bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr)) << control;
  std::vector<std::string> withMps = childLogEnv(path);
  withMps.push_back("CUDA_MPS_PIPE_DIRECTORY=" + pipeDir);
  auto r2 = accl_test::runChildProcesses(2, true, 0, withMps, 120);
  close(sock);
  unlink(control.c_str());
  rmdir(pipeDir.c_str());
  EXPECT_TRUE(r2.ok) << r2.report;
  const std::string log2 = takeChildLogs(path);
  EXPECT_EQ(2, occurrences(log2, "collectives run as kernels on the caller's stream")) << log2;
  EXPECT_EQ(0, occurrences(log2, "no MPS server is seen")) << log2;
}

// A count mismatch between two rank processes, then matched all-reduces: the ranks realign
// across processes (each zeroes its own mailbox, which the other has mapped through CUDA IPC,
// or its proxy drops the other's frames over sockets), the next call fails and the one after
// is exact on both.
void mismatchThenMatchedCallsAcrossProcesses(const accl_test::ChildRole& role, const TestDriver* d, ncclComm_t comm) {
  CUstream s = nullptr;
  CUdeviceptr b = 0;
  const std::string first = matchedAllReduceFirst(d, comm, role.rank, 2, &s, &b);
  ASSERT_TRUE(first.empty()) << first;
  void* p = reinterpret_cast<void*>(b);
  EXPECT_EQ(ncclSuccess, ncclAllReduce(p, p, role.rank == 0 ? 1000 : 2000, ncclInt32, ncclSum, comm,
                                       reinterpret_cast<cudaStream_t>(s)));
  EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclSuccess, ncclCommGetAsyncError(comm, &async));
  EXPECT_EQ(ncclInvalidUsage, async);
  int failures = 0;
  const std::string after = matchedAllReducesAfter(d, comm, role.rank, 2, s, b, 3, &failures);
  EXPECT_TRUE(after.empty()) << after;
  EXPECT_EQ(1, failures);
  EXPECT_EQ(ncclSuccess, ncclCommDestroy(comm));
  d->streamDestroy(s);
  d->memFree(b);
}

TEST(CudaIpc, MismatchedCallsBetweenProcessesRealignAndTheCallAfterTheNextIsExact) {
  if (const accl_test::ChildRole* role = accl_test::childRole()) {
    CHILD_RANK(*role, d, comm);
    return mismatchThenMatchedCallsAcrossProcesses(*role, d, comm);
  }
  REQUIRE_DRIVER(d);
  for (const bool sockets : {false, true}) {
    SCOPED_TRACE(sockets ? "over sockets" : "CUDA IPC mailboxes");
    const std::string path = childLogPath("accl_cuda_mismatch_mp_");
    std::vector<std::string> env = childLogEnv(path);
    if (sockets) env.insert(env.end(), {"NCCL_SHM_DISABLE=1", "NCCL_P2P_DISABLE=1"});
    auto r = accl_test::runChildProcesses(2, true, 0, env, 120);
    const std::string log = takeChildLogs(path);
    EXPECT_TRUE(r.ok) << r.report << "\n" << log;
    EXPECT_NE(std::string::npos, log.find("mismatched calls: rank")) << log;
    EXPECT_EQ(2, occurrences(log, "it realigned the collective streams after mismatched calls")) << log;
    // Each rank's last all-reduce got its peer's last chunk before the peer left: nobody may
    // blame the peer's departure afterwards (a proxy that read the connection once more did).
    EXPECT_EQ(std::string::npos, log.find("closed before the expected data arrived")) << log;
    EXPECT_EQ(std::string::npos, log.find("while this rank still needs it")) << log;
  }
}

// Rank 0 queues an all-reduce and waits for its stream; rank 1 leaves without a word once it is
// queued (its process ends with the test; its communicator is deliberately never destroyed).
void allReduceWhileThePeerProcessExits(const accl_test::ChildRole& role, const TestDriver* d, ncclComm_t comm) {
  const std::string queued = testing::TempDir() + "accl_peer_exit_" + std::to_string(getppid()) + ".queued";
  if (role.rank == 1) {
    for (int i = 0; i < 6000 && access(queued.c_str(), F_OK) != 0; i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return;
  }
  const size_t count = 1000;
  CUdeviceptr buf = 0;
  ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&buf, count * 4));
  CUstream s = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
  EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf), reinterpret_cast<void*>(buf), count,
                                       ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(s)));
  std::ofstream(queued.c_str()) << "queued\n";
  EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));  // returns: the kernel gave up
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclSuccess, ncclCommGetAsyncError(comm, &async));
  EXPECT_EQ(ncclRemoteError, async);
  EXPECT_EQ(ncclSuccess, ncclCommAbort(comm));
  d->streamDestroy(s);
  d->memFree(buf);
  unlink(queued.c_str());
}

// A peer process that dies while this rank's collective kernel waits for it: the kernel must
// not spin forever. The kernel path watches the other processes of the host; the communicator
// fails with ncclRemoteError naming the rank that exited, and the stream moves on.
TEST(CudaIpc, AKernelWaitingForAPeerProcessThatExitedGivesUpAndNamesIt) {
  if (const accl_test::ChildRole* role = accl_test::childRole()) {
    CHILD_RANK(*role, d, comm);
    return allReduceWhileThePeerProcessExits(*role, d, comm);
  }
  REQUIRE_DRIVER(d);
  const std::string path = childLogPath("accl_cuda_peer_exit_");
  auto r = accl_test::runChildProcesses(2, true, 0, childLogEnv(path), 60);
  EXPECT_TRUE(r.ok) << r.report;
  const std::string log = takeChildLogs(path);
  EXPECT_NE(std::string::npos, log.find("rank 0: rank 1 (")) << log;
  EXPECT_NE(std::string::npos, log.find("exited (process")) << log;
}

// The same over sockets (a peer "on another host"): no process watcher is involved, the rank's
// network proxy finds the connection gone while its kernel waits for the peer's chunks, fails
// the communicator naming the peer, and the kernel gives up (also with one hardware queue).
TEST(CudaBackend, AKernelWaitingForAPeerProcessOverSocketsThatExitedGivesUpAndNamesIt) {
  if (const accl_test::ChildRole* role = accl_test::childRole()) {
    CHILD_RANK(*role, d, comm);
    return allReduceWhileThePeerProcessExits(*role, d, comm);
  }
  REQUIRE_DRIVER(d);
  const std::string path = childLogPath("accl_cuda_peer_exit_sock_");
  std::vector<std::string> env = childLogEnv(path);
  env.insert(env.end(), {"NCCL_SHM_DISABLE=1", "NCCL_P2P_DISABLE=1"});
  auto r = accl_test::runChildProcesses(2, true, 0, env, 60);
  EXPECT_TRUE(r.ok) << r.report;
  const std::string log = takeChildLogs(path);
  // The proxy finds it receiving, or sending (rank 0's chunk may still be on its way when the
  // peer's socket is reset): either way it names the rank that left.
  EXPECT_TRUE(log.find("rank 0: the network proxy of the collective kernels cannot receive from rank 1") !=
                  std::string::npos ||
              log.find("rank 0: the network proxy of the collective kernels cannot send to rank 1") != std::string::npos)
      << log;
  EXPECT_NE(std::string::npos, log.find("lost peer rank 1")) << log;
  EXPECT_EQ(std::string::npos, log.find("exited (process")) << log;  // the proxy saw it, not a process watcher
}

// Two ranks of one communicator on device 0, a thread each, each with a device buffer of
// `bytes`: body(rank, comm, buf) ends the communicator itself (these tests abort it); the
// buffer is freed after it.
void onTwoThreadRanksWithABuffer(const TestDriver& d, size_t bytes,
                                 const std::function<void(int rank, ncclComm_t comm, CUdeviceptr buf)>& body) {
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; rank++) {
    threads.emplace_back([&, rank] {
      useDevice(0);
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclSuccess, ncclCommInitRank(&comm, 2, id, rank));
      CUdeviceptr buf = 0;
      ASSERT_EQ(CUDA_SUCCESS, d.memAlloc(&buf, bytes));
      body(rank, comm, buf);
      d.memFree(buf);
    });
  }
  for (auto& t : threads) t.join();
}

// ncclCommAbort frees the CUDA IPC rings (nranks x NCCL_BUFFSIZE of device memory per rank)
// once the device lets them go: aborting communicators again and again leaks nothing.
// A real device does not come back to the exact starting figure (the first communicator loads
// modules and pools, allocations are rounded to 2 MiB), so the figure is taken after a first
// round, and three more rounds must leave it within one allocation granule: a leak of their
// rings (2 ranks x NCCL_BUFFSIZE each, 4 MiB by default) would be 24 MiB or more.
// Communicators that run collectives as kernels allocate no CUDA IPC rings (nranks x
// NCCL_BUFFSIZE of device memory per rank, never used by the kernels): with NCCL_BUFFSIZE at
// 64 MiB, two ranks of one device take their mailboxes (2 MiB each) and nothing near 256 MiB.
TEST(CudaIpc, KernelPathCommunicatorsAllocateNoDeviceRings) {
  setenv("NCCL_BUFFSIZE", "67108864", 1);
  REQUIRE_DRIVER(d);
  auto freeBytes = [&] {
    size_t freeB = 0, total = 0;
    d->memGetInfo(&freeB, &total);
    return freeB;
  };
  useDevice(0);
  const size_t before = freeBytes();
  size_t during = before;
  std::barrier<> meet(2);
  std::string error;
  bool ok = runThreadRanks(
      2, [](int) { useDevice(0); },
      [&](ncclComm_t, int rank) {
        meet.arrive_and_wait();
        if (rank == 0) during = freeBytes();
        meet.arrive_and_wait();
      },
      &error);
  unsetenv("NCCL_BUFFSIZE");
  ASSERT_TRUE(ok) << error;
  EXPECT_LT(before - during, size_t{32} << 20) << "two kernel-path ranks took " << (before - during) << " bytes";
}

TEST(CudaIpc, AbortedCommunicatorsGiveTheirDeviceRingsBack) {
  REQUIRE_DRIVER(d);
  auto freeBytes = [&] {
    size_t freeB = 0, total = 0;
    d->memGetInfo(&freeB, &total);
    return freeB;
  };
  const size_t count = 1000;
  auto round = [&] {
    onTwoThreadRanksWithABuffer(*d, count * 8, [&](int, ncclComm_t comm, CUdeviceptr buf) {
      CUstream s = nullptr;
      d->streamCreate(&s, CU_STREAM_NON_BLOCKING);
      EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf), reinterpret_cast<void*>(buf), count,
                                           ncclFloat64, ncclSum, comm, reinterpret_cast<cudaStream_t>(s)));
      EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
      EXPECT_EQ(ncclSuccess, ncclCommAbort(comm));
      d->streamDestroy(s);
    });
  };
  constexpr size_t kGranule = 2 << 20;
  auto settledNear = [&](size_t target) {
    // Freed by a helper thread once the device's streams have drained: give it a moment.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    size_t now = freeBytes();
    while (now + kGranule < target && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      now = freeBytes();
    }
    return now;
  };
  round();
  size_t base = freeBytes();
  for (int stable = 0, polls = 0; stable < 20 && polls < 4000; polls++) {  // 100 ms without change, 20 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const size_t now = freeBytes();
    stable = now == base ? stable + 1 : 0;
    base = now;
  }
  for (int iter = 0; iter < 3; iter++) round();
  const size_t after = settledNear(base);
  EXPECT_LE(base, after + kGranule) << "device memory not returned after 3 aborted communicators: "
                                    << (base - after) << " bytes fewer free than after the first";
}

// cuMemFree (cudaFree) waits for every stream of the device. One rank frees memory while the
// other rank of this process has a collective kernel running that waits for it: neither can
// finish (on a GPU as on the fake). ACCL_TIMEOUT makes the kernel give up; the communicator
// fails with a message that names the rank waited for and the likely cause.
TEST(CudaBackend, TimeoutNamesARankOfThisDeviceBlockedInADeviceSynchronisingCall) {
  if (const accl_test::ChildRole* role = accl_test::childRole()) {
    (void)role;
    std::string why;
    const TestDriver* d = testDriver(&why);
    ASSERT_NE(d, nullptr) << why;
    std::atomic<bool> queued{false};
    std::string error;
    ASSERT_TRUE(runThreadRanks(
        2,
        [&](ncclComm_t comm, int rank) {
          useDevice(0);
          CUdeviceptr buf = 0, spare = 0;
          ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&buf, 8000));
          ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&spare, 64));
          CUstream s = nullptr;
          d->streamCreate(&s, CU_STREAM_NON_BLOCKING);
          if (rank == 0) {
            EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf), reinterpret_cast<void*>(buf), 1000,
                                                 ncclFloat64, ncclSum, comm, reinterpret_cast<cudaStream_t>(s)));
            queued = true;
          } else {
            while (!queued.load()) std::this_thread::yield();
            d->memFree(spare);  // waits for rank 0's stream until ACCL_TIMEOUT fails its collective
            spare = 0;
          }
          d->streamSynchronize(s);
          d->streamDestroy(s);
          if (spare) d->memFree(spare);
          d->memFree(buf);
        },
        &error))
        << error;
    return;
  }
  REQUIRE_DRIVER(d);
  const std::string path = childLogPath("accl_cuda_sync_hang_");
  auto r = accl_test::runChildProcesses(
      1, false, 2, {"NCCL_DEBUG=WARN", "NCCL_DEBUG_FILE=" + path + ".%p", "ACCL_TIMEOUT=2"}, 60);
  EXPECT_TRUE(r.ok) << r.report;
  const std::string log = takeChildLogs(path);
  EXPECT_NE(std::string::npos, log.find("ACCL_TIMEOUT=2 s expired in a collective kernel: rank 0's kernel waited for "
                                        "rank 1"))
      << log;
  EXPECT_NE(std::string::npos, log.find("(a thread of this process, on CUDA device 0) to send its data")) << log;
  EXPECT_NE(std::string::npos, log.find("cudaFree")) << log;
}

// Ranks on other hosts (issue 10, item 5), forced on one machine: with shared memory and CUDA
// IPC off, the processes connect through the socket transport (net), whose rings are host
// memory, and their kernels reach each other through their network proxies (issue 23): also
// with one hardware queue (fakegpu.mc1.cuda_backend). Every collective and send/recv of the
// matrix on device buffers, results checked.
TEST(CudaBackend, MatrixOnTwoProcessesOverSockets) {
  if (const accl_test::ChildRole* role = accl_test::childRole()) return runMatrixInChild(*role);
  REQUIRE_DRIVER(d);
  const std::string path = childLogPath("accl_cuda_sock_mp_");
  std::vector<std::string> env = childLogEnv(path);
  env.insert(env.end(), {"NCCL_SHM_DISABLE=1", "NCCL_P2P_DISABLE=1"});
  auto r = accl_test::runChildProcesses(2, true, 0, env, 300);
  EXPECT_TRUE(r.ok) << r.report;
  const std::string log = takeChildLogs(path);
  EXPECT_EQ(2, occurrences(log, "collectives run as kernels on the caller's stream")) << log;
  EXPECT_EQ(1, occurrences(log, "network proxy for ranks 1 via NET")) << log;
  EXPECT_EQ(1, occurrences(log, "network proxy for ranks 0 via NET")) << log;
  EXPECT_EQ(0, occurrences(log, "via SHM")) << log;
  EXPECT_EQ(0, occurrences(log, "via CUDA IPC")) << log;
}

// Host rings of the shared-memory and socket transports (NCCL_P2P_DISABLE=1, and
// NCCL_SHM_DISABLE=1 as well) are not registered with the driver: the network proxy copies
// between its mapped box and the rings on the CPU, so pinning them would only cost registration
// (cuMemHostRegister) at every connection.
void ringsAreNotPinned(const TestDriver& d, bool sockets) {
  if (fakeCudaRegisteredHostBytes == nullptr) GTEST_SKIP() << "SKIP: needs the fake driver's count of pinned memory";
  setenv("NCCL_P2P_DISABLE", "1", 1);
  if (sockets) setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("NCCL_BUFFSIZE", "1048576", 1);
  const unsigned long long before = fakeCudaRegisteredHostBytes();
  std::array<ncclComm_t, 2> comms = allReduceOnTwoRanks(d, 1000);
  EXPECT_EQ(before, fakeCudaRegisteredHostBytes()) << "host memory registered with the driver while connected";
  for (auto c : comms) EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
  EXPECT_EQ(before, fakeCudaRegisteredHostBytes());
  unsetenv("NCCL_P2P_DISABLE");
  unsetenv("NCCL_SHM_DISABLE");
  unsetenv("NCCL_BUFFSIZE");
}

TEST(CudaBackend, SharedMemoryRingsAreNotRegisteredWithTheDriver) {
  REQUIRE_DRIVER(d);
  ringsAreNotPinned(*d, false);
}

TEST(CudaBackend, SocketRingsAreNotRegisteredWithTheDriver) {
  REQUIRE_DRIVER(d);
  ringsAreNotPinned(*d, true);
}

TEST(CudaBackend, HostBuffersAndHostStreamsAreRefusedByName) {
  REQUIRE_DRIVER(d);
  std::string error;
  bool ok = runThreadRanks(
      1,
      [&](ncclComm_t comm, int) {
        useDevice(0);
        int dev = -1;
        EXPECT_EQ(ncclSuccess, ncclCommCuDevice(comm, &dev));
        EXPECT_EQ(0, dev);
        std::vector<float> host(16, 1.0f);
        CUdeviceptr buf = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&buf, 64));
        EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(host.data(), host.data(), 16, ncclFloat32, ncclSum, comm, nullptr));
        EXPECT_NE(std::string::npos, std::string(ncclGetLastError(comm)).find("is host memory"))
            << ncclGetLastError(comm);
        cudaStream_t hs = nullptr;
        ASSERT_EQ(ncclSuccess, ncclHostStreamCreate(&hs));
        EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(reinterpret_cast<void*>(buf), reinterpret_cast<void*>(buf), 16,
                                                     ncclFloat32, ncclSum, comm, hs));
        EXPECT_NE(std::string::npos, std::string(ncclGetLastError(comm)).find("ACCL host stream"))
            << ncclGetLastError(comm);
        ncclHostStreamDestroy(hs);
        // ncclMemAlloc: device memory of the current device.
        void* m = nullptr;
        ASSERT_EQ(ncclSuccess, ncclMemAlloc(&m, 1 << 20));
        std::vector<char> pattern(1 << 20, 7), back(1 << 20, 0);
        EXPECT_EQ(CUDA_SUCCESS, d->memcpyHtoD(reinterpret_cast<CUdeviceptr>(m), pattern.data(), pattern.size()));
        EXPECT_EQ(CUDA_SUCCESS, d->memcpyDtoH(back.data(), reinterpret_cast<CUdeviceptr>(m), back.size()));
        EXPECT_EQ(pattern, back);
        EXPECT_EQ(ncclSuccess, ncclMemFree(m));
        d->memFree(buf);
      },
      &error);
  ASSERT_TRUE(ok) << error;
}

// A buffer or stream of another device than the communicator's is refused by name.
TEST(CudaBackend, AnotherDevicesBufferOrStreamIsRefusedByName) {
  setenv("FAKE_CUDA_DEVICES", "2", 0);  // the fake reads it at cuInit; a real driver ignores it
  REQUIRE_DRIVER(d);
  int devices = 0;
  d->deviceGetCount(&devices);
  if (devices < 2) GTEST_SKIP() << "SKIP: needs 2 CUDA devices, this machine has " << devices;
  std::string error;
  bool ok = runThreadRanks(
      1,
      [&](ncclComm_t comm, int) {
        useDevice(1);
        CUdeviceptr other = 0;
        CUstream otherStream = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&other, 4096));
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&otherStream, CU_STREAM_NON_BLOCKING));
        useDevice(0);
        CUdeviceptr mine = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&mine, 4096));
        int dev = -1;
        EXPECT_EQ(ncclSuccess, ncclCommCuDevice(comm, &dev));
        EXPECT_EQ(0, dev);
        EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(reinterpret_cast<void*>(other), reinterpret_cast<void*>(mine), 16,
                                                     ncclFloat32, ncclSum, comm, nullptr));
        EXPECT_NE(std::string::npos, std::string(ncclGetLastError(comm)).find("memory of CUDA device 1"))
            << ncclGetLastError(comm);
        EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(reinterpret_cast<void*>(mine), reinterpret_cast<void*>(mine), 16,
                                                     ncclFloat32, ncclSum, comm,
                                                     reinterpret_cast<cudaStream_t>(otherStream)));
        EXPECT_NE(std::string::npos, std::string(ncclGetLastError(comm)).find("another CUDA context"))
            << ncclGetLastError(comm);
        d->memFree(mine);
        useDevice(1);
        d->streamDestroy(otherStream);
        d->memFree(other);
        useDevice(0);
      },
      &error);
  ASSERT_TRUE(ok) << error;
}

// Host buffers beside GPU ones in one process (PyTorch's CPU tensors on a GPU machine):
// ncclCommInitRankHost gives a host-backend communicator, and its splits stay on the host.
TEST(CudaBackend, InitRankHostGivesAHostCommunicatorInACudaProcess) {
  REQUIRE_DRIVER(d);
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  std::vector<std::string> problems(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; rank++) {
    threads.emplace_back([&, rank] {
      useDevice(0);
      ncclComm_t comm = nullptr;
      if (ncclCommInitRankHost(&comm, 2, id, rank) != ncclSuccess) {
        problems[rank] = "ncclCommInitRankHost failed";
        return;
      }
      std::vector<float> v(1000, rank + 1.0f);
      if (ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
        problems[rank] += std::string("host all-reduce: ") + ncclGetLastError(comm) + "\n";
      else if (v[0] != 3.0f || v[999] != 3.0f)
        problems[rank] += "host all-reduce gave " + std::to_string(v[0]) + "\n";
      ncclComm_t half = nullptr;
      if (ncclCommSplit(comm, 0, rank, &half, nullptr) != ncclSuccess) {
        problems[rank] += "split failed\n";
      } else {
        std::vector<int32_t> w(10, rank + 1);
        if (ncclAllReduce(w.data(), w.data(), w.size(), ncclInt32, ncclSum, half, nullptr) != ncclSuccess || w[0] != 3)
          problems[rank] += "all-reduce on the split (host) communicator failed\n";
        ncclCommDestroy(half);
      }
      ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
}

TEST(CudaBackend, AbortWithWorkQueuedOnAHeldStreamReturnsAndReleasesTheStream) {
  REQUIRE_DRIVER(d);
  std::atomic<int> done{0};
  onTwoThreadRanksWithABuffer(*d, 4096, [&](int, ncclComm_t comm, CUdeviceptr buf) {
    HeldStream held(*d);
    ASSERT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(buf), reinterpret_cast<void*>(buf), 1024,
                                         ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(held.stream)));
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ncclSuccess, ncclCommAbort(comm));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
    held.release();
    EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(held.stream));  // no hang: the aborted kernels gave up
    done++;
  });
  EXPECT_EQ(2, done.load());
}

}  // namespace
}  // namespace accl_cuda_test
