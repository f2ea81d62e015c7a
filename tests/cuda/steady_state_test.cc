// Issue 41, item 5: what one small collective costs the host and the stream once a rank has
// made calls on the same stream and buffers before (the steady state). Counted on the fake
// driver's call log (process-wide, so every rank's call is in it): per rank per call one
// kernel launch and nothing else queued (no event record, stream wait, memset or memory
// operation), and no cuPointerGetAttribute, cuEventCreate or allocation. A call on another
// stream than the rank's last queues one stream memory wait on the rank's launch counter
// (comm/launch_order.h) and no event. The checks that the shortcuts keep the order: a call on
// another stream still runs after the previous one (its input is that call's output), and so
// does one after that stream is destroyed with the call still queued.
#include <gtest/gtest.h>
#include <barrier>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>
#include "common/rank_runner.h"
#include "cuda/test_driver.h"
#include "fake_cuda/fake_cuda_test_api.h"
#include "nccl.h"

namespace accl_cuda_test {
namespace {

using accl_test::runThreadRanks;

// Four ranks' streams plus their communicators' own streams fill the fake's default eight
// hardware queues, and a launch's event record queued behind a rank's kernel that waits for a
// peer would block that peer's launch on a shared queue (as on a GPU): one queue per stream
// here. Set before the fake reads it (once, at its first stream).
const bool kOwnQueues = [] { return setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0) == 0; }();

#define REQUIRE_FAKE_LOG(d)                                                                  \
  std::string why_;                                                                          \
  const TestDriver* d = testDriver(&why_);                                                   \
  if (d == nullptr) GTEST_SKIP() << "SKIP: " << why_;                                        \
  if (fakeCudaLogReset == nullptr || !fakeCudaAvailable())                                   \
    GTEST_SKIP() << "SKIP: counts queue entries on the fake driver's call log (a real driver " \
                    "keeps none)";

// What the process queued and asked of the driver during one round of calls (one per rank).
struct Round {
  unsigned long long launches, memsets, records, waits, copies, memops;
  unsigned long long pointerAttrs, eventCreates, allocs;
  unsigned long long valueWaits;  // cuStreamWaitValue64 (each also a memop)
};

Round takeRound() {
  return {fakeCudaQueued(FAKE_CUDA_QUEUED_LAUNCH),       fakeCudaQueued(FAKE_CUDA_QUEUED_MEMSET),
          fakeCudaQueued(FAKE_CUDA_QUEUED_EVENT_RECORD), fakeCudaQueued(FAKE_CUDA_QUEUED_STREAM_WAIT),
          fakeCudaQueued(FAKE_CUDA_QUEUED_MEMCPY),       fakeCudaQueued(FAKE_CUDA_QUEUED_MEMOP),
          fakeCudaDriverCalls("cuPointerGetAttribute"),  fakeCudaDriverCalls("cuEventCreate"),
          fakeCudaDriverCalls("cuMemAlloc") + fakeCudaDriverCalls("cuMemHostAlloc") +
              fakeCudaDriverCalls("cuMemHostRegister"),
          fakeCudaDriverCalls("cuStreamWaitValue64")};
}

// Rank r's input element i: small integers, so float sums are exact.
float inputOf(int rank, size_t i) { return static_cast<float>((rank + 1) * 3 + static_cast<int>(i % 7)); }

float sumOf(int n, size_t i) {
  float s = 0;
  for (int r = 0; r < n; r++) s += inputOf(r, i);
  return s;
}

// n thread ranks on device 0, each on its own stream: warm-up calls, then rounds of one 8-byte
// all-reduce per rank (out of place and in place), each counted on its own.
void steadyStateRounds(int n) {
  REQUIRE_FAKE_LOG(d);
  constexpr size_t kCount = 2;  // two floats: 8 bytes
  constexpr int kWarmUp = 3, kRounds = 6;
  std::barrier sync(n);
  std::vector<Round> outOfPlace, inPlace;
  std::vector<std::string> wrong(n);
  std::string error;
  bool ok = runThreadRanks(
      n,
      [&](ncclComm_t comm, int rank) {
        useDevice(0);
        CUstream s = nullptr;
        CUdeviceptr in = 0, out = 0;
        if (d->streamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS || d->memAlloc(&in, kCount * 4) != CUDA_SUCCESS ||
            d->memAlloc(&out, kCount * 4) != CUDA_SUCCESS) {
          wrong[rank] = "set-up failed";
          return;
        }
        const auto cs = reinterpret_cast<cudaStream_t>(s);
        std::vector<float> host(kCount), got(kCount);
        auto fill = [&] {
          for (size_t i = 0; i < kCount; i++) host[i] = inputOf(rank, i);
          d->memcpyHtoD(in, host.data(), kCount * 4);
        };
        auto check = [&](CUdeviceptr where, const char* what, int round) {
          d->streamSynchronize(s);
          d->memcpyDtoH(got.data(), where, kCount * 4);
          for (size_t i = 0; i < kCount; i++)
            if (got[i] != sumOf(n, i) && wrong[rank].empty())
              wrong[rank] = std::string(what) + " round " + std::to_string(round) + ": element " + std::to_string(i) +
                            " is " + std::to_string(got[i]) + ", not " + std::to_string(sumOf(n, i));
        };
        void* const inp = reinterpret_cast<void*>(in);
        void* const outp = reinterpret_cast<void*>(out);
        fill();
        for (int w = 0; w < kWarmUp; w++) {
          ncclAllReduce(inp, outp, kCount, ncclFloat32, ncclSum, comm, cs);
          check(out, "warm-up", w);
        }
        for (int round = 0; round < kRounds; round++) {
          const bool place = round % 2 == 1;
          fill();  // an in-place round leaves the sum in `in`
          d->streamSynchronize(s);
          sync.arrive_and_wait();
          if (rank == 0) fakeCudaLogReset();
          sync.arrive_and_wait();
          if (ncclAllReduce(inp, place ? inp : outp, kCount, ncclFloat32, ncclSum, comm, cs) != ncclSuccess &&
              wrong[rank].empty())
            wrong[rank] = "ncclAllReduce failed in round " + std::to_string(round);
          sync.arrive_and_wait();  // every rank's call is queued
          if (rank == 0) (place ? inPlace : outOfPlace).push_back(takeRound());
          sync.arrive_and_wait();
          check(place ? in : out, place ? "in place" : "out of place", round);
        }
        d->streamSynchronize(s);
        d->memFree(in);
        d->memFree(out);
        d->streamDestroy(s);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(wrong[r].empty()) << "rank " << r << ": " << wrong[r];
  const auto un = static_cast<unsigned long long>(n);
  for (const auto* rounds : {&outOfPlace, &inPlace}) {
    const bool place = rounds == &inPlace;
    for (const Round& c : *rounds) {
      const std::string what = std::to_string(n) + (place ? " rank(s), in place" : " rank(s), out of place");
      if (n == 1) {
        // One rank: the input is the result (issue 41, item 1).
        EXPECT_EQ(0u, c.launches) << what;
        EXPECT_EQ(place ? 0u : 1u, c.copies) << what;
        EXPECT_EQ(0u, c.memsets) << what;
        EXPECT_EQ(0u, c.records) << what;
      } else {
        EXPECT_EQ(un, c.launches) << what << ": one launch per rank";
        EXPECT_EQ(0u, c.copies) << what;
        // No memset: the rank's last block resets the launch's progress counters itself.
        EXPECT_EQ(0u, c.memsets) << what;
        // No event: the launch's last block stores its number in the rank's launch counter,
        // which a call on another stream and ncclCommDestroy wait for (comm/launch_order.h).
        EXPECT_EQ(0u, c.records) << what;
      }
      EXPECT_EQ(0u, c.waits) << what << ": the stream runs the rank's previous launch first anyway";
      EXPECT_EQ(0u, c.memops) << what << ": no stream memory wait on the same stream";
      EXPECT_EQ(0u, c.pointerAttrs) << what << ": pointer kinds are cached per allocation";
      EXPECT_EQ(0u, c.eventCreates) << what << ": events come from a pool";
      EXPECT_EQ(0u, c.allocs) << what;
    }
  }
  EXPECT_EQ(static_cast<size_t>(kRounds / 2), outOfPlace.size());
  EXPECT_EQ(static_cast<size_t>(kRounds / 2), inPlace.size());
}

TEST(SteadyState, OneRankQueuesOneCopyOutOfPlaceAndNothingInPlace) { steadyStateRounds(1); }
TEST(SteadyState, TwoThreadRanksQueueOneLaunchEachAndNoWait) { steadyStateRounds(2); }
TEST(SteadyState, FourThreadRanksQueueOneLaunchEachAndNoWait) { steadyStateRounds(4); }

// A rank's launches share its mailbox: one queued on another stream must still run after the
// previous one. The first call is large (its kernel runs a while on the fake); the second, on
// another stream and queued at once, all-reduces the first one's output: its result is right
// only if it ran after. Then the same with the first stream destroyed while its call is still
// queued.
TEST(SteadyState, ACallOnAnotherStreamRunsAfterThePreviousOne) {
  REQUIRE_FAKE_LOG(d);
  constexpr int n = 2;
  constexpr size_t kBig = 1 << 18;  // 1 MiB of floats
  std::barrier sync(n);
  std::vector<std::string> wrong(n);
  std::vector<Round> switches;
  std::string error;
  bool ok = runThreadRanks(
      n,
      [&](ncclComm_t comm, int rank) {
        useDevice(0);
        CUstream a = nullptr, b = nullptr, c = nullptr;
        CUdeviceptr in = 0, mid = 0, out = 0;
        d->streamCreate(&a, CU_STREAM_NON_BLOCKING);
        d->streamCreate(&b, CU_STREAM_NON_BLOCKING);
        d->streamCreate(&c, CU_STREAM_NON_BLOCKING);
        d->memAlloc(&in, kBig * 4);
        d->memAlloc(&mid, kBig * 4);
        d->memAlloc(&out, kBig * 4);
        std::vector<float> host(kBig), got(kBig);
        for (size_t i = 0; i < kBig; i++) host[i] = inputOf(rank, i);
        d->memcpyHtoD(in, host.data(), kBig * 4);
        auto* const inp = reinterpret_cast<void*>(in);
        auto* const midp = reinterpret_cast<void*>(mid);
        auto* const outp = reinterpret_cast<void*>(out);
        auto expectOut = [&](const char* what, float factor) {
          d->memcpyDtoH(got.data(), out, kBig * 4);
          for (size_t i = 0; i < kBig; i++)
            if (got[i] != factor * sumOf(n, i)) {
              if (wrong[rank].empty())
                wrong[rank] = std::string(what) + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                              ", not " + std::to_string(factor * sumOf(n, i));
              return;
            }
        };
        // Warm-up on stream a.
        ncclAllReduce(inp, midp, kBig, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(a));
        d->streamSynchronize(a);

        // a then b, b reading what a writes.
        sync.arrive_and_wait();
        ncclAllReduce(inp, midp, kBig, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(a));
        sync.arrive_and_wait();
        if (rank == 0) fakeCudaLogReset();
        sync.arrive_and_wait();
        ncclAllReduce(midp, outp, kBig, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(b));
        sync.arrive_and_wait();
        if (rank == 0) switches.push_back(takeRound());
        d->streamSynchronize(b);
        expectOut("a call on a second stream", static_cast<float>(n));

        // b destroyed with its call still queued, then c.
        d->streamSynchronize(a);
        sync.arrive_and_wait();
        ncclAllReduce(inp, midp, kBig, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(b));
        d->streamDestroy(b);
        ncclAllReduce(midp, outp, kBig, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(c));
        d->streamSynchronize(c);
        expectOut("a call after its previous stream was destroyed", static_cast<float>(n));

        // Back on a stream used before, after a switch: no wait needed, and still right.
        sync.arrive_and_wait();
        ncclAllReduce(inp, outp, kBig, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(c));
        sync.arrive_and_wait();
        d->streamSynchronize(c);
        expectOut("the last call", 1.0f);
        d->streamDestroy(a);
        d->streamDestroy(c);
        d->memFree(in);
        d->memFree(mid);
        d->memFree(out);
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(wrong[r].empty()) << "rank " << r << ": " << wrong[r];
  ASSERT_EQ(1u, switches.size());
  const Round& c = switches[0];
  const auto un = static_cast<unsigned long long>(n);
  EXPECT_EQ(un, c.memops) << "each rank's call on the new stream waits for its last: one stream memory wait";
  EXPECT_EQ(un, c.valueWaits) << "the wait is on the rank's launch counter";
  EXPECT_EQ(0u, c.waits) << "no event wait";
  EXPECT_EQ(0u, c.records) << "no event record";
  EXPECT_EQ(un, c.launches);
  EXPECT_EQ(0u, c.memsets);
  EXPECT_EQ(0u, c.eventCreates);
  EXPECT_EQ(0u, c.allocs);
}

// Calls alternating between two streams, each call's input the previous call's output, no
// host synchronisation between them: a call on another stream than the rank's last queues
// exactly one stream memory wait (on the rank's launch counter) per rank and nothing else
// but its launch; one on the same stream as the last queues only the launch. The result after
// all of them is right only if each ran after the one before.
void alternatingStreams(int n) {
  REQUIRE_FAKE_LOG(d);
  constexpr size_t kCount = 2;  // 8 bytes
  // Streams by round (the warm-up ends on stream 0): 1 0 0 1 1 0.
  const std::vector<int> streamOf = {1, 0, 0, 1, 1, 0};
  const int rounds = static_cast<int>(streamOf.size());
  std::barrier sync(n);
  std::vector<Round> counted;
  std::vector<std::string> wrong(n);
  std::string error;
  bool ok = runThreadRanks(
      n,
      [&](ncclComm_t comm, int rank) {
        useDevice(0);
        CUstream st[2] = {};
        CUdeviceptr buf[2] = {};
        for (int i = 0; i < 2; i++)
          if (d->streamCreate(&st[i], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
              d->memAlloc(&buf[i], kCount * 4) != CUDA_SUCCESS) {
            wrong[rank] = "set-up failed";
            return;
          }
        auto call = [&](int from, int s) {
          return ncclAllReduce(reinterpret_cast<void*>(buf[from]), reinterpret_cast<void*>(buf[1 - from]), kCount,
                               ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(st[s]));
        };
        // Warm-up: both buffers both ways, on both streams, ending on stream 0.
        call(0, 0);
        call(1, 1);
        call(0, 0);
        d->streamSynchronize(st[0]);
        d->streamSynchronize(st[1]);
        std::vector<float> host(kCount), got(kCount);
        for (size_t i = 0; i < kCount; i++) host[i] = inputOf(rank, i);
        d->memcpyHtoD(buf[0], host.data(), kCount * 4);
        for (int k = 0; k < rounds; k++) {
          sync.arrive_and_wait();
          if (rank == 0) fakeCudaLogReset();
          sync.arrive_and_wait();
          if (call(k % 2, streamOf[k]) != ncclSuccess && wrong[rank].empty())
            wrong[rank] = "ncclAllReduce failed in round " + std::to_string(k);
          sync.arrive_and_wait();  // every rank's call is queued
          if (rank == 0) counted.push_back(takeRound());
        }
        d->streamSynchronize(st[0]);
        d->streamSynchronize(st[1]);
        d->memcpyDtoH(got.data(), buf[rounds % 2], kCount * 4);
        float factor = 1;  // every round after the first multiplies the sum by n
        for (int k = 1; k < rounds; k++) factor *= static_cast<float>(n);
        for (size_t i = 0; i < kCount; i++)
          if (got[i] != factor * sumOf(n, i) && wrong[rank].empty())
            wrong[rank] = "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", not " +
                          std::to_string(factor * sumOf(n, i));
        for (int i = 0; i < 2; i++) {
          d->memFree(buf[i]);
          d->streamDestroy(st[i]);
        }
      },
      &error);
  ASSERT_TRUE(ok) << error;
  for (int r = 0; r < n; r++) EXPECT_TRUE(wrong[r].empty()) << "rank " << r << ": " << wrong[r];
  ASSERT_EQ(streamOf.size(), counted.size());
  const auto un = static_cast<unsigned long long>(n);
  for (int k = 0; k < rounds; k++) {
    const Round& c = counted[k];
    const bool switched = streamOf[k] != (k == 0 ? 0 : streamOf[k - 1]);
    const std::string what = std::to_string(n) + " ranks, round " + std::to_string(k) +
                             (switched ? " (another stream than the last)" : " (the same stream as the last)");
    EXPECT_EQ(un, c.launches) << what;
    EXPECT_EQ(switched ? un : 0u, c.memops) << what << ": one stream memory wait per rank per switch";
    EXPECT_EQ(switched ? un : 0u, c.valueWaits) << what;
    EXPECT_EQ(0u, c.waits) << what << ": no event wait";
    EXPECT_EQ(0u, c.records) << what << ": no event record";
    EXPECT_EQ(0u, c.memsets) << what;
    EXPECT_EQ(0u, c.copies) << what;
    EXPECT_EQ(0u, c.pointerAttrs) << what;
    EXPECT_EQ(0u, c.eventCreates) << what;
    EXPECT_EQ(0u, c.allocs) << what;
  }
}

TEST(SteadyState, TwoRanksAlternatingStreamsWaitOncePerSwitch) { alternatingStreams(2); }
TEST(SteadyState, FourRanksAlternatingStreamsWaitOncePerSwitch) { alternatingStreams(4); }

}  // namespace
}  // namespace accl_cuda_test
