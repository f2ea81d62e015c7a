// The LL path (kernels/ll_kernel.h, sched/ll_collective.h): collectives whose largest buffer is
// at most 64 KiB, among ranks that reach each other's mailboxes, go in one pass of flagged
// 16-byte lines, one small block per rank. On the fake driver: every kind, in place and out of
// place, from 1 element to exactly 64 KiB, exact against a host reference (reductions folded in
// rank order, float after every step); the launch log says one LL launch of one block per rank
// and nothing else; one byte more takes the mailbox kernel; NCCL_PROTO moves calls between the
// two and a bad value fails init; a count mismatch is reported and the ranks go on; processes
// over CUDA IPC mailboxes take the same path. (Every type and op, avg and PreMulSum at counts 1
// and 7 go through the LL path in cuda_backend_test's matrices.)
#include <gtest/gtest.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "common/child_logs.h"
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

constexpr size_t kLlMaxFloats = (64u << 10) / 4;

size_t largestBytes(const Call& c) { return std::max(inElems(c), outElems(c)) * 4; }

// One call on this rank, twice over (the second uses the other parity's regions): an empty
// string when both results are exact and an out-of-place input is left as it was. Buffers are
// allocated once and freed after both calls: cuMemFree waits for the whole device, so a rank
// freeing between calls would wait for a peer's kernel that waits for this rank.
std::string runCall(const TestDriver* d, const Call& c, ncclComm_t comm, int rank) {
  CUstream s = nullptr;
  if (d->streamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return "stream";
  const size_t bufElems = std::max(inElems(c), outElems(c));
  std::vector<float> mine(inElems(c));
  for (size_t i = 0; i < mine.size(); i++) mine[i] = input(rank, i);
  CUdeviceptr out = 0, in = 0;
  if (d->memAlloc(&out, bufElems * 4) != CUDA_SUCCESS) return "alloc";
  if (!c.inPlace && d->memAlloc(&in, mine.size() * 4) != CUDA_SUCCESS) return "alloc";
  std::string problem;
  for (int iter = 0; iter < 2 && problem.empty(); iter++) {
    std::vector<float> host(bufElems, kSentinel);
    CUdeviceptr recv = out;
    if (c.inPlace) {
      const size_t at = c.kind == Kind::AllGather ? rank * c.count : 0;
      std::copy(mine.begin(), mine.end(), host.begin() + static_cast<long>(at));
      in = out + at * 4;
      if (c.kind == Kind::ReduceScatter) recv = out + rank * c.count * 4;
    } else {
      d->memcpyHtoDAsync(in, mine.data(), mine.size() * 4, s);
    }
    d->memcpyHtoDAsync(out, host.data(), bufElems * 4, s);
    const ncclResult_t r =
        issue(c, reinterpret_cast<void*>(in), reinterpret_cast<void*>(recv), comm, reinterpret_cast<cudaStream_t>(s));
    if (r != ncclSuccess) problem = std::string("returned ") + ncclGetErrorString(r);
    std::vector<float> got(outElems(c));
    d->memcpyDtoHAsync(got.data(), recv, got.size() * 4, s);
    if (d->streamSynchronize(s) != CUDA_SUCCESS && problem.empty()) problem = "stream failed";
    for (size_t i = 0; i < got.size() && problem.empty(); i++) {
      const float want = expected(c, rank, i);
      if (std::memcmp(&got[i], &want, 4) != 0)
        problem = "call " + std::to_string(iter) + " element " + std::to_string(i) + ": got " + std::to_string(got[i]) +
                  " want " + std::to_string(want);
    }
    if (!c.inPlace) {
      // Async on the rank's stream: a synchronous copy waits for the whole device, hence for a
      // peer's next kernel, which waits for this rank's.
      std::vector<float> back(mine.size());
      d->memcpyDtoHAsync(back.data(), in, back.size() * 4, s);
      d->streamSynchronize(s);
      if (problem.empty() && back != mine) problem = "the input changed";
    }
  }
  if (!c.inPlace) d->memFree(in);
  d->memFree(out);
  d->streamDestroy(s);
  return problem;
}

// The call on c.n thread ranks of device 0; what the launch log says afterwards.
KernelLaunches runOnThreadRanks(const TestDriver* d, const Call& c) {
  fakeCudaLogReset();
  std::vector<std::string> problems(c.n);
  std::string error;
  const bool ok = runThreadRanks(
      c.n, [](int) { useDevice(0); }, [&](ncclComm_t comm, int rank) { problems[rank] = runCall(d, c, comm, rank); },
      &error);
  EXPECT_TRUE(ok) << error;
  for (int r = 0; r < c.n; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
  return kernelLaunchesSinceReset();
}

struct LlCase {
  Kind kind;
  int n;
  bool inPlace;
};
std::string caseName(const testing::TestParamInfo<LlCase>& i) {
  return std::string(kindName(i.param.kind)) + "On" + std::to_string(i.param.n) + "Ranks" +
         (i.param.inPlace ? "InPlace" : "OutOfPlace");
}

class LlKinds : public testing::TestWithParam<LlCase> {};

// One element, an odd count whose lines end mid-line, and the largest buffer exactly 64 KiB:
// exact, one LL launch per rank and call, one block each, nothing else launched.
TEST_P(LlKinds, AreExactInOneLaunchOfOneBlockPerRank) {
  REQUIRE_FAKE(d);
  const LlCase p = GetParam();
  const bool segmented = p.kind == Kind::AllGather || p.kind == Kind::ReduceScatter;
  for (const size_t count : {size_t{1}, size_t{1001}, segmented ? kLlMaxFloats / p.n : kLlMaxFloats}) {
    Call c{p.kind, p.n, count, p.kind == Kind::Broadcast ? 1 : p.kind == Kind::Reduce ? p.n - 1 : -1, p.inPlace};
    SCOPED_TRACE("count " + std::to_string(count) + " (" + std::to_string(largestBytes(c)) + " bytes)");
    const KernelLaunches l = runOnThreadRanks(d, c);
    EXPECT_EQ(2 * p.n, l.ll) << "one LL launch per rank and call";
    EXPECT_EQ(0, l.mailbox);
    EXPECT_EQ(0, l.direct);
    EXPECT_EQ(1u, l.maxLlGrid) << "one block per rank";
    EXPECT_LE(l.maxLlBlock, 512u);
  }
}

INSTANTIATE_TEST_SUITE_P(Calls, LlKinds,
                         testing::Values(LlCase{Kind::AllReduce, 2, false}, LlCase{Kind::AllReduce, 4, true},
                                         LlCase{Kind::AllGather, 2, true}, LlCase{Kind::AllGather, 4, false},
                                         LlCase{Kind::ReduceScatter, 2, false}, LlCase{Kind::ReduceScatter, 4, true},
                                         LlCase{Kind::Broadcast, 4, false}, LlCase{Kind::Broadcast, 2, true},
                                         LlCase{Kind::Reduce, 4, false}, LlCase{Kind::Reduce, 2, true},
                                         LlCase{Kind::AllReduce, 3, false}),
                         caseName);

// 8 bytes: one block of at most 128 threads (one line per thread, rounded up to 64).
TEST(LlPath, AnEightByteAllReduceIsOneSmallBlockPerRank) {
  REQUIRE_FAKE(d);
  const KernelLaunches l = runOnThreadRanks(d, {Kind::AllReduce, 2, 2});
  EXPECT_EQ(4, l.ll);
  EXPECT_EQ(1u, l.maxLlGrid);
  EXPECT_LE(l.maxLlBlock, 128u);
  EXPECT_EQ(0, l.mailbox + l.direct);
}

// NCCL lets a broadcast's non-root ranks pass a null input and a reduce's non-root ranks a null
// output: the LL kernel never touches them, and the results are exact.
TEST(LlPath, BuffersACallDoesNotUseMayBeNull) {
  REQUIRE_FAKE(d);
  const size_t count = 333;
  std::vector<std::string> problems(3);
  std::string error;
  const bool ok = runThreadRanks(
      3, [](int) { useDevice(0); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        CUdeviceptr b = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&b, count * 4));
        auto st = reinterpret_cast<cudaStream_t>(s);
        std::vector<float> v(count);
        for (size_t i = 0; i < count; i++) v[i] = input(rank, i);
        d->memcpyHtoDAsync(b, v.data(), count * 4, s);
        void* p = reinterpret_cast<void*>(b);
        // Broadcast from rank 1: the others' input is null.
        EXPECT_EQ(ncclSuccess, ncclBroadcast(rank == 1 ? p : nullptr, p, count, ncclFloat32, 1, comm, st));
        d->memcpyDtoHAsync(v.data(), b, count * 4, s);
        d->streamSynchronize(s);
        for (size_t i = 0; i < count && problems[rank].empty(); i++)
          if (v[i] != input(1, i)) problems[rank] = "broadcast element " + std::to_string(i);
        // Reduce to rank 2 of what everyone now holds (rank 1's input): the others' output is null.
        CUdeviceptr out = 0;
        if (rank == 2) {
          ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&out, count * 4));
        }
        EXPECT_EQ(ncclSuccess,
                  ncclReduce(p, rank == 2 ? reinterpret_cast<void*>(out) : nullptr, count, ncclFloat32, ncclSum, 2, comm, st));
        if (rank == 2) d->memcpyDtoHAsync(v.data(), out, count * 4, s);
        d->streamSynchronize(s);
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        if (async != ncclSuccess) problems[rank] = std::string("async error ") + ncclGetErrorString(async);
        for (size_t i = 0; rank == 2 && i < count && problems[rank].empty(); i++) {
          const float x = input(1, i), want = x + x + x;
          if (v[i] != want) problems[rank] = "reduce element " + std::to_string(i);
        }
        if (out) d->memFree(out);
        d->memFree(b);
        d->streamDestroy(s);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < 3; r++) EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
}

// One element past 64 KiB is the mailbox kernel's.
TEST(LlPath, OneElementPast64KiBTakesTheMailboxKernel) {
  REQUIRE_FAKE(d);
  const KernelLaunches l = runOnThreadRanks(d, {Kind::AllReduce, 2, kLlMaxFloats + 1});
  EXPECT_EQ(0, l.ll);
  EXPECT_EQ(4, l.mailbox);
}

// NCCL_PROTO (read at init): Simple keeps small calls on the mailbox kernel; per-function
// entries move one function only; the results stay exact either way.
TEST(LlPath, NcclProtoChoosesBetweenLlAndSimple) {
  REQUIRE_FAKE(d);
  setenv("NCCL_PROTO", "Simple", 1);
  KernelLaunches l = runOnThreadRanks(d, {Kind::AllReduce, 2, 100});
  EXPECT_EQ(0, l.ll);
  EXPECT_EQ(4, l.mailbox);
  setenv("NCCL_PROTO", "^LL", 1);
  l = runOnThreadRanks(d, {Kind::AllGather, 2, 100});
  EXPECT_EQ(0, l.ll);
  EXPECT_EQ(4, l.mailbox);
  setenv("NCCL_PROTO", "Simple;allgather:LL", 1);
  l = runOnThreadRanks(d, {Kind::AllGather, 2, 100});
  EXPECT_EQ(4, l.ll) << "all-gather may use LL";
  l = runOnThreadRanks(d, {Kind::Broadcast, 2, 100, 0});
  EXPECT_EQ(0, l.ll) << "broadcast may not";
  EXPECT_EQ(4, l.mailbox);
  setenv("NCCL_PROTO", "LL", 1);  // LL only, but a call it cannot carry still runs (on Simple)
  l = runOnThreadRanks(d, {Kind::AllReduce, 2, kLlMaxFloats * 2});
  EXPECT_EQ(0, l.ll);
  EXPECT_EQ(4, l.mailbox);
  unsetenv("NCCL_PROTO");
}

// A value that names no protocol fails the communicator's init, saying why.
TEST(LlPath, ABadNcclProtoFailsInitWithInvalidUsage) {
  REQUIRE_FAKE(d);
  accl_test::WarnLog warns("ll_bad_proto");
  setenv("NCCL_PROTO", "LL64", 1);
  ncclComm_t comms[2] = {nullptr, nullptr};
  int devs[2] = {0, 0};
  EXPECT_EQ(ncclInvalidUsage, ncclCommInitAll(comms, 2, devs));
  unsetenv("NCCL_PROTO");
  const std::string text = warns.take();
  EXPECT_NE(std::string::npos, text.find("unknown protocol \"LL64\"")) << text;
}

// Rank 0 all-reduces 1000 ints, rank 1 2000 (both LL): both fail with ncclInvalidUsage and a
// WARN naming both calls; no data is used; then matched calls run exact again.
TEST(LlPath, ACountMismatchIsReportedAndMatchedCallsAfterwardAreExact) {
  REQUIRE_FAKE(d);
  accl_test::WarnLog warns("ll_mismatch");
  fakeCudaLogReset();
  std::vector<ncclResult_t> async(2, ncclSuccess);
  std::vector<int> failures(2, 0);
  std::vector<std::string> problems(2);
  std::string error;
  const bool ok = runThreadRanks(
      2, [](int) { useDevice(0); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        CUdeviceptr b = 0;
        ASSERT_EQ(CUDA_SUCCESS, d->streamCreate(&s, CU_STREAM_NON_BLOCKING));
        ASSERT_EQ(CUDA_SUCCESS, d->memAlloc(&b, 2000 * 4));
        void* p = reinterpret_cast<void*>(b);
        auto st = reinterpret_cast<cudaStream_t>(s);
        EXPECT_EQ(ncclSuccess, ncclAllReduce(p, p, rank == 0 ? 1000 : 2000, ncclInt32, ncclSum, comm, st));
        EXPECT_EQ(CUDA_SUCCESS, d->streamSynchronize(s));
        EXPECT_EQ(ncclSuccess, ncclCommGetAsyncError(comm, &async[rank]));
        // Matched calls until one is exact (the realignment may fail the first of them).
        for (int i = 0; i < 4; i++) {
          std::vector<int32_t> v(500, rank + 1);
          d->memcpyHtoDAsync(b, v.data(), v.size() * 4, s);
          const ncclResult_t r = ncclAllReduce(p, p, v.size(), ncclInt32, ncclSum, comm, st);
          d->memcpyDtoHAsync(v.data(), b, v.size() * 4, s);
          d->streamSynchronize(s);
          ncclResult_t a = ncclSuccess;
          ncclCommGetAsyncError(comm, &a);
          if (r != ncclSuccess || a != ncclSuccess) {
            failures[rank]++;
            continue;
          }
          problems[rank].clear();
          for (size_t j = 0; j < v.size() && problems[rank].empty(); j++)
            if (v[j] != 3) problems[rank] = "element " + std::to_string(j) + " = " + std::to_string(v[j]);
          if (problems[rank].empty()) break;
        }
        d->memFree(b);
        d->streamDestroy(s);
      },
      &error);
  const std::string text = warns.take();
  ASSERT_TRUE(ok) << error;
  EXPECT_GE(kernelLaunchesSinceReset().ll, 2);
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(ncclInvalidUsage, async[r]) << "rank " << r << "\n" << text;
    EXPECT_LE(failures[r], 1) << "rank " << r << "\n" << text;
    EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
  }
  EXPECT_NE(std::string::npos, text.find("mismatched calls: rank")) << text;
  EXPECT_NE(std::string::npos, text.find("AllReduce(1000 x int32, sum)")) << text;
  EXPECT_NE(std::string::npos, text.find("AllReduce(2000 x int32, sum)")) << text;
}

// Two rank processes on one device (CUDA IPC mailboxes): every kind exact on the LL path, and
// each process's launch log shows only LL launches.
TEST(LlPath, ProcessesOnOneDeviceTakeItThroughIpcMailboxes) {
  if (const accl_test::ChildRole* role = accl_test::childRole()) {
    std::string why;
    const TestDriver* d = testDriver(&why);
    ASSERT_NE(d, nullptr) << why;
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclSuccess, accl_test::initChildRankComm(*role, &comm));
    fakeCudaLogReset();
    for (Kind k : {Kind::AllReduce, Kind::AllGather, Kind::ReduceScatter, Kind::Broadcast, Kind::Reduce}) {
      const Call c{k, role->nranks, 777, k == Kind::Broadcast || k == Kind::Reduce ? 1 : -1, false};
      EXPECT_EQ("", runCall(d, c, comm, role->rank)) << kindName(k);
    }
    const KernelLaunches l = kernelLaunchesSinceReset();
    EXPECT_EQ(10, l.ll);
    EXPECT_EQ(0, l.mailbox + l.direct);
    EXPECT_EQ(ncclSuccess, ncclCommDestroy(comm));
    return;
  }
  REQUIRE_FAKE(d);
  auto r = accl_test::runChildProcesses(2, true, 0, {}, 180);
  EXPECT_TRUE(r.ok) << r.report;
}

}  // namespace
}  // namespace accl_cuda_test
