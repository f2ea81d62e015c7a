// Medium all-reduces on the ShmDirect board fold in slices (sched/lane_board_slices.cc): each
// rank reduces its slice of every input and the ranks gather the slices. The result must be
// bit for bit the rank-order fold ((x0 + x1) + x2 ...) that whole folds give, on every rank,
// in place and out of place, over one chunk and several, with ranks arriving late.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "api/thread_ranks_util.h"
#include "nccl.h"

using accltest::runRanks;
using namespace std::chrono_literals;

namespace {

std::vector<float> inputOf(int rank, size_t count, int round) {
  std::mt19937 gen(static_cast<unsigned>(rank * 7919 + round));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = d(gen) * static_cast<float>(1 + rank);  // sums round differently by order
  return v;
}

void expectRankOrderSums(int n, bool inPlace) {
  // 32 KiB + 12 bytes (just sliced, slices of unequal length), one 256 KiB board chunk, and
  // 500 KiB + 4: two chunks, the second one short (all within the tuner's ShmDirect limit).
  const size_t counts[] = {(32 << 10) / 4 + 3, (256 << 10) / 4, (500 << 10) / 4 + 1};
  runRanks(n, [&](int rank, ncclComm_t& comm) {
    int round = 0;
    for (size_t count : counts) {
      for (int rep = 0; rep < 3; rep++, round++) {
        std::vector<float> in = inputOf(rank, count, round);
        std::vector<float> out(count, -1.0f);
        float* dst = inPlace ? in.data() : out.data();
        if (rank == round % n) std::this_thread::sleep_for(2ms);
        ASSERT_EQ(ncclAllReduce(in.data(), dst, count, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
        std::vector<float> want = inputOf(0, count, round);
        for (int r = 1; r < n; r++) {
          const std::vector<float> x = inputOf(r, count, round);
          for (size_t i = 0; i < count; i++) want[i] += x[i];
        }
        ASSERT_EQ(std::memcmp(dst, want.data(), count * sizeof(float)), 0)
            << "rank " << rank << " of " << n << ", " << count << " floats, round " << round;
      }
    }
  });
}

TEST(BoardSlices, ThreeRanksGiveTheRankOrderSumBitForBit) { expectRankOrderSums(3, false); }
TEST(BoardSlices, FourRanksInPlaceGiveTheRankOrderSumBitForBit) { expectRankOrderSums(4, true); }

}  // namespace
