// Call stamps on the kernel path (issue 27) never fail a matched call: thread ranks on one
// device make the same long sequence of matched calls of random kinds and sizes (all-reduce,
// broadcast and reduce from random roots, all-gather, reduce-scatter, a ring of sends and
// receives), through their mailboxes or, with NCCL_P2P_DISABLE=1, through their network
// proxies. Every call must succeed and be exact (int32 sums, checked against values computed
// here). ACCL_TEST_KERNEL_STAMP_CALLS sets how many calls (defaults below).
#include <gtest/gtest.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>
#include "common/rank_runner.h"
#include "cuda/test_driver.h"
#include "nccl.h"

namespace accl_cuda_test {
namespace {

// Calls per run: 100000 (the figure) for 2 ranks through their mailboxes, 10000 for the
// other set-ups (the same code checks the stamps there). Each call is a kernel launch on the
// fake's emulated grid and a copy back: 0.85 ms for 2 ranks, 1.8 ms for 3, measured here (the
// test prints its own figure).
long callsPerRun(int n, bool proxy) {
  const char* v = getenv("ACCL_TEST_KERNEL_STAMP_CALLS");
  return v ? atol(v) : n == 2 && !proxy ? 100000 : 10000;
}

enum class Call { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, SendRing, Count };

// What a rank puts in for call `k`: distinct per rank, call and element.
int32_t inputOf(int rank, long k, size_t i) { return static_cast<int32_t>((rank + 1) * 1000 + (k % 97) * 7 + i % 13); }

// One call of the sequence: its kind, element count per rank and root.
struct Step {
  Call kind;
  size_t count;
  int root;
};

Step nextStep(std::mt19937& rng, int n) {
  Step s;
  s.kind = static_cast<Call>(rng() % static_cast<unsigned>(Call::Count));
  // Mostly small (below one chunk), sometimes several chunks, as a training step mixes them.
  s.count = rng() % 8 == 0 ? 1 + rng() % 70000 : 1 + rng() % 2048;
  s.root = static_cast<int>(rng() % static_cast<unsigned>(n));
  return s;
}

// The exact result on `rank` of `s` (call number k) among n ranks; `elems` is its length.
std::vector<int32_t> expected(const Step& s, long k, int rank, int n) {
  std::vector<int32_t> out;
  auto sumAt = [&](size_t i) {
    int32_t v = 0;
    for (int r = 0; r < n; r++) v += inputOf(r, k, i);
    return v;
  };
  switch (s.kind) {
    case Call::AllReduce:
      for (size_t i = 0; i < s.count; i++) out.push_back(sumAt(i));
      break;
    case Call::Reduce:
      if (rank == s.root)
        for (size_t i = 0; i < s.count; i++) out.push_back(sumAt(i));
      break;
    case Call::Broadcast:
      for (size_t i = 0; i < s.count; i++) out.push_back(inputOf(s.root, k, i));
      break;
    case Call::AllGather:
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < s.count; i++) out.push_back(inputOf(r, k, i));
      break;
    case Call::ReduceScatter:
      // Rank r's input holds n blocks of count elements, element j of the whole at index j.
      for (size_t i = 0; i < s.count; i++) out.push_back(sumAt(rank * s.count + i));
      break;
    case Call::SendRing: {
      const int from = (rank + n - 1) % n;
      for (size_t i = 0; i < s.count; i++) out.push_back(inputOf(from, k, i));
      break;
    }
    case Call::Count: break;
  }
  return out;
}

// Makes call `s` (number k) from `in` into `out` on stream st; the input is n * count long.
ncclResult_t makeCall(const Step& s, int rank, int n, const void* in, void* out, ncclComm_t comm, cudaStream_t st) {
  switch (s.kind) {
    case Call::AllReduce: return ncclAllReduce(in, out, s.count, ncclInt32, ncclSum, comm, st);
    case Call::Reduce: return ncclReduce(in, out, s.count, ncclInt32, ncclSum, s.root, comm, st);
    case Call::Broadcast: return ncclBroadcast(in, out, s.count, ncclInt32, s.root, comm, st);
    case Call::AllGather: return ncclAllGather(in, out, s.count, ncclInt32, comm, st);
    case Call::ReduceScatter: return ncclReduceScatter(in, out, s.count, ncclInt32, ncclSum, comm, st);
    case Call::SendRing: {
      ncclGroupStart();
      ncclResult_t a = ncclSend(in, s.count, ncclInt32, (rank + 1) % n, comm, st);
      ncclResult_t b = ncclRecv(out, s.count, ncclInt32, (rank + n - 1) % n, comm, st);
      ncclResult_t c = ncclGroupEnd();
      return a != ncclSuccess ? a : b != ncclSuccess ? b : c;
    }
    case Call::Count: break;
  }
  return ncclInternalError;
}

class KernelStamps : public testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(KernelStamps, MatchedCallsOfRandomKindsAndSizesAllSucceedExactly) {
  const int n = std::get<0>(GetParam());
  const bool proxy = std::get<1>(GetParam());
  std::string why;
  const TestDriver* d = testDriver(&why);
  if (d == nullptr) GTEST_SKIP() << "SKIP: " << why;
  if (proxy) setenv("NCCL_P2P_DISABLE", "1", 1);
  unsetenv("ACCL_CHECK_MISMATCH");  // the default: stamps on
  const long calls = callsPerRun(n, proxy);
  constexpr size_t kMaxElems = 70000 * 4;  // n * count at most (n <= 4)
  std::vector<std::string> problems(n);
  std::vector<long> made(n, 0);
  std::string error;
  const auto begin = std::chrono::steady_clock::now();
  bool ok = accl_test::runThreadRanks(
      n, [](int) { useDevice(0); },
      [&](ncclComm_t comm, int rank) {
        CUstream s = nullptr;
        CUdeviceptr in = 0, out = 0;
        if (d->streamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS || d->memAlloc(&in, kMaxElems * 4) != CUDA_SUCCESS ||
            d->memAlloc(&out, kMaxElems * 4) != CUDA_SUCCESS) {
          problems[rank] = "no stream or buffers";
          return;
        }
        auto st = reinterpret_cast<cudaStream_t>(s);
        std::mt19937 rng(20261203);  // the same sequence on every rank
        std::vector<int32_t> host(kMaxElems);
        for (long k = 0; k < calls && problems[rank].empty(); k++) {
          const Step step = nextStep(rng, n);
          const size_t inElems = step.kind == Call::ReduceScatter ? n * step.count : step.count;
          for (size_t i = 0; i < inElems; i++) host[i] = inputOf(rank, k, i);
          const std::vector<int32_t> want = expected(step, k, rank, n);
          ncclResult_t r = ncclSuccess;
          if (d->memcpyHtoDAsync(in, host.data(), inElems * 4, s) != CUDA_SUCCESS) r = ncclUnhandledCudaError;
          if (r == ncclSuccess)
            r = makeCall(step, rank, n, reinterpret_cast<void*>(in), reinterpret_cast<void*>(out), comm, st);
          if (r == ncclSuccess && !want.empty() &&
              d->memcpyDtoHAsync(host.data(), out, want.size() * 4, s) != CUDA_SUCCESS)
            r = ncclUnhandledCudaError;
          if (r == ncclSuccess && d->streamSynchronize(s) != CUDA_SUCCESS) r = ncclUnhandledCudaError;
          ncclResult_t async = ncclSuccess;
          if (r == ncclSuccess) ncclCommGetAsyncError(comm, &async);
          if (r != ncclSuccess || async != ncclSuccess) {
            problems[rank] = "call " + std::to_string(k) + " (kind " + std::to_string(static_cast<int>(step.kind)) +
                             ", count " + std::to_string(step.count) + ") failed: " + ncclGetErrorString(r) + " / " +
                             ncclGetErrorString(async);
            break;
          }
          for (size_t i = 0; i < want.size(); i++)
            if (host[i] != want[i]) {
              problems[rank] = "call " + std::to_string(k) + " (kind " + std::to_string(static_cast<int>(step.kind)) +
                               ", count " + std::to_string(step.count) + ") gave " + std::to_string(host[i]) +
                               " at " + std::to_string(i) + ", not " + std::to_string(want[i]);
              break;
            }
          made[rank] = k + 1;
        }
        d->streamDestroy(s);
        d->memFree(in);
        d->memFree(out);
      },
      &error);
  unsetenv("NCCL_P2P_DISABLE");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  printf("%d ranks%s: %ld matched calls in %.1f s (%.3f ms a call)\n", n, proxy ? " through the proxies" : "", made[0],
         secs, made[0] ? secs * 1000 / static_cast<double>(made[0]) : 0.0);
  EXPECT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) {
    EXPECT_TRUE(problems[r].empty()) << "rank " << r << ": " << problems[r];
    EXPECT_EQ(calls, made[r]) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Calls, KernelStamps, testing::Combine(testing::Values(2, 3), testing::Bool()),
                         [](const testing::TestParamInfo<std::tuple<int, bool>>& p) {
                           return "On" + std::to_string(std::get<0>(p.param)) + "Ranks" +
                                  (std::get<1>(p.param) ? "ThroughTheProxy" : "");
                         });

}  // namespace
}  // namespace accl_cuda_test
