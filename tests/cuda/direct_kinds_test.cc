// The direct path's other collectives (kernels/direct_kernel.h): all-gather, reduce-scatter,
// broadcast and reduce on thread ranks of one process on one device, each rank's kernel loading
// its peers' buffers and storing into theirs in place. Every output is checked against a host
// reference (reductions folded in rank order, float after every step: the mailbox path's bits);
// the buffers a call does not use keep their sentinel; the fake driver's log says every call
// took one direct launch per rank and no mailbox launch, and its payload counters say exactly
// which bytes moved (each input loaded once, each output stored once, nothing in host memory).
#include <gtest/gtest.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "common/rank_runner.h"
#include "common/warn_log.h"
#include "cuda/direct_launch_log.h"
#include "cuda/float_calls.h"
#include "cuda/test_driver.h"
#include "fake_cuda/fake_cuda_test_api.h"
#include "nccl.h"

namespace accl_cuda_test {
namespace {

using accl_test::runThreadRanks;

// Payload bytes each kind loads and stores, by the bytes of its count argument.
struct Moved {
  double loads, stores;
};
Moved movedBytes(const Call& c) {
  const double b = static_cast<double>(c.count) * 4, n = c.n;
  switch (c.kind) {
    case Kind::AllReduce: return {n * b, n * b};
    case Kind::AllGather: return {n * b, n * n * b};
    case Kind::ReduceScatter: return {n * n * b, n * b};
    case Kind::Broadcast: return {b, n * b};
    case Kind::Reduce: return {n * b, b};
  }
  return {0, 0};
}

void runOnOneDevice(const Call& c) {
  REQUIRE_FAKE(d);
  fakeCudaLogReset();
  fakeCudaPayloadReset();
  std::vector<std::string> problems(c.n);
  std::string error;
  bool ok = runThreadRanks(
      c.n, [](int) { useDevice(0); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        // In place, the input lives in the output: all-gather's at rank x count, reduce-
        // scatter's output at rank x count of the input, the others the same buffer.
        const size_t bufElems = std::max(inElems(c), outElems(c));
        CUdeviceptr out = 0, in = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&out, bufElems * 4));
        std::vector<float> host(bufElems, kSentinel);
        std::vector<float> mine(inElems(c));
        for (size_t i = 0; i < mine.size(); i++) mine[i] = input(rank, i);
        CUdeviceptr recv = out;
        if (c.inPlace) {
          const size_t at = c.kind == Kind::AllGather ? rank * c.count : 0;
          std::copy(mine.begin(), mine.end(), host.begin() + static_cast<long>(at));
          in = out + at * 4;
          if (c.kind == Kind::ReduceScatter) recv = out + rank * c.count * 4;
        } else {
          ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&in, mine.size() * 4));
          ASSERT_EQ(CUDA_SUCCESS, d->memcpyHtoDAsync(in, mine.data(), mine.size() * 4, s));
        }
        ASSERT_EQ(CUDA_SUCCESS, d->memcpyHtoDAsync(out, host.data(), bufElems * 4, s));
        EXPECT_EQ(ncclSuccess, issue(c, reinterpret_cast<void*>(in), reinterpret_cast<void*>(recv), comm, reinterpret_cast<cudaStream_t>(s)));
        std::vector<float> got(outElems(c));
        ASSERT_EQ(CUDA_SUCCESS, d->memcpyDtoHAsync(got.data(), recv, got.size() * 4, s));
        ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
        for (size_t i = 0; i < got.size() && problems[rank].empty(); i++) {
          const float want = expected(c, rank, i);
          if (std::memcmp(&got[i], &want, 4) != 0)
            problems[rank] = "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + " want " +
                             std::to_string(want);
        }
        if (!c.inPlace) {  // the input is never written
          std::vector<float> back(mine.size());
          ASSERT_EQ(CUDA_SUCCESS, d->memcpyDtoH(back.data(), in, back.size() * 4));
          if (problems[rank].empty() && back != mine) problems[rank] = "the input changed";
          d->memFree(in);
        }
        d->memFree(out);
        d->streamDestroy(s);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < c.n; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
  const KernelLaunches l = kernelLaunchesSinceReset();
  EXPECT_EQ(c.n, l.direct) << "one direct launch per rank";
  EXPECT_EQ(0, l.mailbox) << "no byte through the mailbox slots";
  const size_t largest = std::max(inElems(c), outElems(c)) * 4;
  if (largest >= (1u << 20)) {
    EXPECT_GE(l.minDirectGrid, 16u) << "at least 16 blocks per rank from 1 MiB";
  }
  EXPECT_EQ(0ull, fakeCudaPayloadBytes(2, 0) + fakeCudaPayloadBytes(2, 1)) << "payload bytes in host memory";
  EXPECT_EQ(0ull, fakeCudaPayloadBytes(1, 0) + fakeCudaPayloadBytes(1, 1)) << "payload bytes in imported memory";
  const Moved want = movedBytes(c);
  EXPECT_EQ(want.loads, static_cast<double>(fakeCudaPayloadBytes(0, 0))) << "device bytes loaded";
  EXPECT_EQ(want.stores, static_cast<double>(fakeCudaPayloadBytes(0, 1))) << "device bytes stored";
}

constexpr size_t k4MiBFloats = (4u << 20) / 4;

TEST(DirectKinds, AllGatherOnTwoThreadRanksIsExact) { runOnOneDevice({Kind::AllGather, 2, k4MiBFloats}); }
TEST(DirectKinds, AllGatherOnFourThreadRanksIsExact) { runOnOneDevice({Kind::AllGather, 4, k4MiBFloats}); }
// Segments that do not end on 16 bytes: pieces cross them element by element.
TEST(DirectKinds, AllGatherOfAnOddCountOnThreeThreadRanksIsExact) {
  runOnOneDevice({Kind::AllGather, 3, k4MiBFloats / 4 + 3});
}
TEST(DirectKinds, AllGatherInPlaceOnFourThreadRanksIsExact) {
  runOnOneDevice({Kind::AllGather, 4, k4MiBFloats / 2 + 1, -1, true});
}
TEST(DirectKinds, ReduceScatterOnTwoThreadRanksIsExact) { runOnOneDevice({Kind::ReduceScatter, 2, k4MiBFloats}); }
TEST(DirectKinds, ReduceScatterOfAnOddCountOnFourThreadRanksIsExact) {
  runOnOneDevice({Kind::ReduceScatter, 4, k4MiBFloats / 4 + 5});
}
TEST(DirectKinds, ReduceScatterInPlaceOnThreeThreadRanksIsExact) {
  runOnOneDevice({Kind::ReduceScatter, 3, k4MiBFloats / 2 + 1, -1, true});
}
TEST(DirectKinds, BroadcastFromRankOneOfFourIsExact) { runOnOneDevice({Kind::Broadcast, 4, k4MiBFloats, 1}); }
TEST(DirectKinds, BroadcastInPlaceFromRankTwoOfThreeIsExact) {
  runOnOneDevice({Kind::Broadcast, 3, k4MiBFloats + 3, 2, true});
}
// Only the root's output is written; the others keep their sentinel.
TEST(DirectKinds, ReduceToRankTwoOfFourIsExactAndWritesOnlyTheRoot) {
  runOnOneDevice({Kind::Reduce, 4, k4MiBFloats, 2});
}
TEST(DirectKinds, ReduceInPlaceToRankZeroOfTwoIsExact) { runOnOneDevice({Kind::Reduce, 2, k4MiBFloats + 1, 0, true}); }

// Rank 0 broadcasts from root 0, rank 1 from root 1: both fail (ncclInvalidUsage, the mismatch
// WARNed naming both calls) instead of each copying its own input.
TEST(DirectKinds, MismatchedBroadcastRootsFailOnBothRanks) {
  REQUIRE_FAKE(d);
  accl_test::WarnLog warns("direct_root_mismatch");
  fakeCudaLogReset();
  std::vector<ncclResult_t> async(2, ncclSuccess);
  std::string error;
  const size_t count = k4MiBFloats;
  bool ok = runThreadRanks(
      2, [](int) { useDevice(0); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        CUdeviceptr b = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&b, count * 4));
        EXPECT_EQ(ncclSuccess, ncclBroadcast(reinterpret_cast<void*>(b), reinterpret_cast<void*>(b), count,
                                             ncclFloat32, rank, comm, reinterpret_cast<cudaStream_t>(s)));
        EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
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
  for (int r = 0; r < 2; r++) EXPECT_EQ(ncclInvalidUsage, async[r]) << "rank " << r << "\n" << text;
  EXPECT_NE(std::string::npos, text.find("mismatched calls: rank")) << text;
  EXPECT_NE(std::string::npos, text.find("root 1")) << text;
}

// One thread drives both ranks' all-gathers in one group on the NULL stream: one direct launch
// carries both (a block range each), twice over.
TEST(DirectKinds, OneThreadDrivesTwoRanksAllGatherInOneLaunch) {
  REQUIRE_FAKE(d);
  ncclComm_t comms[2] = {nullptr, nullptr};
  int devs[2] = {0, 0};
  ASSERT_EQ(ncclSuccess, ncclCommInitAll(comms, 2, devs));
  fakeCudaLogReset();
  const size_t count = (1u << 20) / 4;
  CUdeviceptr in[2] = {0, 0}, out[2] = {0, 0};
  for (int r = 0; r < 2; r++) {
    ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&in[r], count * 4));
    ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&out[r], 2 * count * 4));
    std::vector<float> v(count, r + 0.5f);
    d->memcpyHtoD(in[r], v.data(), count * 4);
  }
  for (int iter = 0; iter < 2; iter++) {
    ASSERT_EQ(ncclSuccess, ncclGroupStart());
    for (int r = 0; r < 2; r++)
      ASSERT_EQ(ncclSuccess, ncclAllGather(reinterpret_cast<void*>(in[r]), reinterpret_cast<void*>(out[r]), count,
                                           ncclFloat32, comms[r], nullptr));
    ASSERT_EQ(ncclSuccess, ncclGroupEnd());
  }
  ASSERT_EQ(CUDA_SUCCESS, d->streamSynchronize(nullptr));
  for (int r = 0; r < 2; r++) {
    std::vector<float> v(2 * count);
    d->memcpyDtoH(v.data(), out[r], v.size() * 4);
    EXPECT_EQ(0.5f, v[0]) << "rank " << r;
    EXPECT_EQ(0.5f, v[count - 1]) << "rank " << r;
    EXPECT_EQ(1.5f, v[count]) << "rank " << r;
    EXPECT_EQ(1.5f, v[2 * count - 1]) << "rank " << r;
    d->memFree(in[r]);
    d->memFree(out[r]);
  }
  EXPECT_EQ(2, kernelLaunchesSinceReset().direct) << "one launch per group, both ranks in it";
  for (auto c : comms) EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
}

}  // namespace
}  // namespace accl_cuda_test
