// The direct path (sched/direct_collective.h, kernels/direct_kernel.h) on thread ranks of one
// process on one device: large all-reduces load every rank's input in place and store into
// every rank's output. Checked against a host reference in rank order (the same bits as the
// mailbox path), with the fake driver's launch log (grid per rank) and its payload counters
// (where the bytes were, how many moved); in place; a mismatched count failing cleanly on both
// ranks; an abort ending a kernel that waits for a peer; capture and replays.
#include <gtest/gtest.h>
#include <unistd.h>
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "common/rank_runner.h"
#include "common/warn_log.h"
#include "cuda/direct_launch_log.h"
#include "cuda/test_driver.h"
#include "fake_cuda/fake_cuda_test_api.h"
#include "nccl.h"

namespace accl_cuda_test {
namespace {

using accl_test::runThreadRanks;

float input(int rank, size_t i, int round) {
  return static_cast<float>(static_cast<int>((i * 2654435761u + rank * 97 + round * 13) % 2001) - 1000) * 0.3751f;
}

// Rank 0's value, then + rank 1's, ...: float after every step, as the kernels fold.
float reference(int n, size_t i, int round) {
  float acc = input(0, i, round);
  for (int r = 1; r < n; r++) acc = acc + input(r, i, round);
  return acc;
}

// "" when out holds the reference, else the first difference.
std::string check(const std::vector<float>& out, int n, int round) {
  for (size_t i = 0; i < out.size(); i++) {
    const float want = reference(n, i, round);
    if (std::memcmp(&out[i], &want, 4) != 0)
      return "element " + std::to_string(i) + ": got " + std::to_string(out[i]) + " want " + std::to_string(want);
  }
  return "";
}


// n thread ranks on device 0 all-reduce `count` floats (in place or not); every rank checks
// its output against the reference.
void allReduceOnOneDevice(int n, size_t count, bool inPlace) {
  REQUIRE_FAKE(d);
  fakeCudaLogReset();
  fakeCudaPayloadReset();
  std::vector<std::string> problems(n);
  std::string error;
  bool ok = runThreadRanks(
      n, [](int) { useDevice(0); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        CUdeviceptr in = 0, out = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&in, count * 4));
        if (!inPlace) {
          ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&out, count * 4));
        }
        std::vector<float> host(count);
        for (size_t i = 0; i < count; i++) host[i] = input(rank, i, 0);
        ASSERT_EQ(CUDA_SUCCESS, d->memcpyHtoDAsync(in, host.data(), count * 4, s));
        void* dst = reinterpret_cast<void*>(inPlace ? in : out);
        EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(in), dst, count, ncclFloat32, ncclSum, comm,
                                             reinterpret_cast<cudaStream_t>(s)));
        ASSERT_EQ(CUDA_SUCCESS, d->memcpyDtoHAsync(host.data(), inPlace ? in : out, count * 4, s));
        ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
        problems[rank] = check(host, n, 0);
        d->memFree(in);
        if (out) d->memFree(out);
        d->streamDestroy(s);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
  const KernelLaunches l = kernelLaunchesSinceReset();
  EXPECT_EQ(n, l.direct) << "one direct launch per rank";
  EXPECT_EQ(0, l.mailbox) << "no byte through the mailbox slots";
  const size_t bytes = count * 4;
  if (bytes >= (1u << 20)) {
    EXPECT_GE(l.minDirectGrid, 16u) << "at least 16 blocks per rank from 1 MiB";
  }
  EXPECT_EQ(0ull, fakeCudaPayloadBytes(2, 0) + fakeCudaPayloadBytes(2, 1)) << "payload bytes in host memory";
  EXPECT_EQ(0ull, fakeCudaPayloadBytes(1, 0) + fakeCudaPayloadBytes(1, 1)) << "payload bytes in imported memory";
  const double moved = static_cast<double>(fakeCudaPayloadBytes(0, 0) + fakeCudaPayloadBytes(0, 1));
  // Each rank's input loaded once and each output stored once: 2n bytes per payload byte.
  EXPECT_LE(moved, (2.0 * n + 0.2) * static_cast<double>(bytes)) << "device bytes per payload byte";
  EXPECT_GE(moved, 2.0 * n * static_cast<double>(bytes)) << "every byte loaded and stored";
}

constexpr size_t k64MiBFloats = (64u << 20) / 4;

TEST(DirectPath, AllReduce64MiBOnTwoThreadRanksIsExactWithFourBytesMovedPerByte) {
  allReduceOnOneDevice(2, k64MiBFloats, false);
}
TEST(DirectPath, AllReduce64MiBOnFourThreadRanksIsExact) { allReduceOnOneDevice(4, k64MiBFloats, false); }
TEST(DirectPath, AllReduceInPlaceOnTwoThreadRanksIsExact) { allReduceOnOneDevice(2, (4u << 20) / 4 + 7, true); }
// An odd size whose pieces do not end on 16 bytes: the tail goes element by element.
TEST(DirectPath, AllReduceOfAnOddCountOnFourThreadRanksIsExact) { allReduceOnOneDevice(4, (1u << 20) / 4 * 3 + 5, false); }

// Rank 1 all-reduces half rank 0's count: both ranks' calls fail (ncclInvalidUsage, the
// mismatch WARNed naming both calls) instead of reading past the smaller buffer or hanging.
TEST(DirectPath, MismatchedCountFailsOnBothRanksWithoutTouchingTheOthersBuffer) {
  REQUIRE_FAKE(d);
  accl_test::WarnLog warns("direct_mismatch");
  fakeCudaLogReset();
  std::vector<ncclResult_t> async(2, ncclSuccess);
  std::vector<CUresult> synced(2, CUDA_SUCCESS);
  std::string error;
  const size_t count = (2u << 20) / 4;
  bool ok = runThreadRanks(
      2, [](int) { useDevice(0); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        CUdeviceptr b = 0;
        const size_t mine = rank == 0 ? count : count / 2;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&b, mine * 4));
        EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(b), reinterpret_cast<void*>(b), mine, ncclFloat32,
                                             ncclSum, comm, reinterpret_cast<cudaStream_t>(s)));
        synced[rank] = d->streamSynchronize(s);
        for (int i = 0; i < 200 && async[rank] == ncclSuccess; i++) {
          ncclCommGetAsyncError(comm, &async[rank]);
          if (async[rank] == ncclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        d->memFree(b);
        d->streamDestroy(s);
      },
      &error);
  const std::string text = warns.take();
  ASSERT_TRUE(ok) << error;
  EXPECT_GE(kernelLaunchesSinceReset().direct, 2);
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(CUDA_SUCCESS, synced[r]) << "rank " << r << ": the kernel faulted (a read past a buffer?)";
    EXPECT_EQ(ncclInvalidUsage, async[r]) << "rank " << r << "\n" << text;
  }
  EXPECT_NE(std::string::npos, text.find("mismatched calls: rank")) << text;
}

// Rank 0 all-reduces, rank 1 never does: rank 0's kernel waits for rank 1's post until
// ncclCommAbort makes it give up, and the stream goes on.
TEST(DirectPath, AbortEndsAKernelWaitingForAPeer) {
  REQUIRE_FAKE(d);
  fakeCudaLogReset();
  const size_t count = (2u << 20) / 4;
  ncclUniqueId id;
  ASSERT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  ncclComm_t comms[2] = {nullptr, nullptr};
  std::vector<std::thread> init;
  for (int r = 0; r < 2; r++)
    init.emplace_back([&, r] {
      useDevice(0);
      ncclCommInitRank(&comms[r], 2, id, r);
    });
  for (auto& t : init) t.join();
  ASSERT_NE(nullptr, comms[0]);
  ASSERT_NE(nullptr, comms[1]);
  useDevice(0);
  CUstream s = nullptr;
  CUdeviceptr b = 0;
  ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&b, count * 4));
  EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(b), reinterpret_cast<void*>(b), count, ncclFloat32,
                                       ncclSum, comms[0], reinterpret_cast<cudaStream_t>(s)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(CUDA_ERROR_NOT_READY, d->streamQuery(s)) << "the kernel did not wait for its peer";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclSuccess, ncclCommAbort(comms[0]));
  EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(s)) << "the aborted kernel did not end";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(ncclSuccess, ncclCommAbort(comms[1]));
  EXPECT_EQ(1, kernelLaunchesSinceReset().direct);
  d->memFree(b);
  d->streamDestroy(s);
}

// A captured direct all-reduce replayed with new inputs: the call number comes from the
// ranks' device counters, so every replay pairs with the peer's.
TEST(DirectPath, CapturedAllReduceReplaysExactlyTwice) {
  REQUIRE_FAKE(d);
  const int n = 2;
  const size_t count = (2u << 20) / 4;
  std::vector<std::string> problems(n);
  std::barrier meet(n);
  fakeCudaLogReset();
  std::string error;
  bool ok = runThreadRanks(
      n, [](int) { useDevice(0); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        CUdeviceptr in = 0, out = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&in, count * 4));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&out, count * 4));
        meet.arrive_and_wait();
        ASSERT_EQ(CUDA_SUCCESS, d->streamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        EXPECT_EQ(ncclSuccess, ncclAllReduce(reinterpret_cast<void*>(in), reinterpret_cast<void*>(out), count,
                                             ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(s)));
        CUgraph graph = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->streamEndCapture(s, &graph));
        CUgraphExec exec = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->graphInstantiate(&exec, graph, 0));
        std::vector<float> host(count);
        for (int round = 1; round <= 2; round++) {
          for (size_t i = 0; i < count; i++) host[i] = input(rank, i, round);
          ASSERT_EQ(CUDA_SUCCESS, d->memcpyHtoDAsync(in, host.data(), count * 4, s));
          ASSERT_EQ(CUDA_SUCCESS, d->graphLaunch(exec, s));
          ASSERT_EQ(CUDA_SUCCESS, d->memcpyDtoHAsync(host.data(), out, count * 4, s));
          ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
          const std::string p = check(host, n, round);
          if (!p.empty() && problems[rank].empty()) problems[rank] = "replay " + std::to_string(round) + ": " + p;
        }
        d->graphExecDestroy(exec);
        d->graphDestroy(graph);
        d->memFree(in);
        d->memFree(out);
        d->streamDestroy(s);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
  EXPECT_EQ(n, kernelLaunchesSinceReset().direct) << "captured once per rank";
}

}  // namespace
}  // namespace accl_cuda_test

namespace accl_cuda_test {
namespace {

// One thread drives both ranks in one group on the NULL stream: one direct launch carries both
// ranks (a block range each), which must run side by side; in place, three times over.
TEST(DirectPath, OneThreadDrivesTwoRanksInOneGroupInOneLaunch) {
  REQUIRE_FAKE(d);
  ncclComm_t comms[2] = {nullptr, nullptr};
  int devs[2] = {0, 0};
  ASSERT_EQ(ncclSuccess, ncclCommInitAll(comms, 2, devs));
  fakeCudaLogReset();
  const size_t count = (2u << 20) / 8;
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
  EXPECT_EQ(3, kernelLaunchesSinceReset().direct) << "one launch per group, both ranks in it";
  for (auto c : comms) EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
}

}  // namespace
}  // namespace accl_cuda_test
