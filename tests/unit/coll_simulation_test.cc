// Simulates every algorithm's plans for n ranks in one thread over small in-memory
// channels: checks results against a direct computation and that no plan can deadlock when
// a channel holds only a few pieces (the planner's real invariant: piece <= channel / 4).
#include <gtest/gtest.h>
#include <cstring>
#include <functional>
#include <numeric>
#include <vector>
#include "coll/algorithms.h"
#include "unit/mem_world.h"

namespace accl {
namespace {

using Factory = std::function<std::unique_ptr<StepSource>(const CollArgs&)>;

int32_t input(int rank, size_t i) { return static_cast<int32_t>(rank * 1000 + i % 977); }

struct Case {
  int n;
  size_t count;
  int root;
};

// Runs `factory` on every rank with int32 sum; in/out sizes in elements.
void simulate(const Factory& factory, const Case& c, size_t inElems, size_t outElems,
              const std::function<void(int, const std::vector<int32_t>&, const std::vector<std::vector<int32_t>>&)>&
                  check) {
  const size_t piece = 64;           // bytes
  World world(c.n, 4 * piece);       // the planner keeps channels >= 4 pieces
  std::vector<std::vector<int32_t>> in(c.n, std::vector<int32_t>(inElems)), out(c.n, std::vector<int32_t>(outElems, -7));
  std::vector<Lane> lanes(c.n);
  for (int r = 0; r < c.n; r++) {
    for (size_t i = 0; i < inElems; i++) in[r][i] = input(r, i);
    CollArgs a;
    a.src = reinterpret_cast<const char*>(in[r].data());
    a.dst = reinterpret_cast<char*>(out[r].data());
    a.count = c.count;
    a.type = ncclInt32;
    a.op = dev::RedKind::Sum;
    a.root = c.root;
    a.rank = r;
    a.nranks = c.n;
    a.pieceBytes = piece;
    lanes[r].add(factory(a));
  }
  ASSERT_TRUE(world.run(lanes)) << "deadlock with n=" << c.n << " count=" << c.count;
  for (int r = 0; r < c.n; r++) check(r, out[r], in);
}

std::vector<Case> cases(bool rooted) {
  std::vector<Case> v;
  for (int n : {2, 3, 4, 5, 7, 8})
    for (size_t count : {1, 7, 16, 97, 1000})
      for (int root : rooted ? std::vector<int>{0, n - 1, n / 2} : std::vector<int>{0})
        v.push_back({n, count, root});
  return v;
}

void expectAllReduce(const Factory& f) {
  for (const Case& c : cases(false)) {
    simulate(f, c, c.count, c.count, [&](int r, const std::vector<int32_t>& out, const auto& in) {
      for (size_t i = 0; i < c.count; i++) {
        int32_t want = 0;
        for (int p = 0; p < c.n; p++) want += in[p][i];
        ASSERT_EQ(out[i], want) << "rank " << r << " i " << i << " n " << c.n << " count " << c.count;
      }
    });
  }
}

TEST(AlgorithmSimulation, RingAllReduceSumsEveryElementOnEveryRankWithoutDeadlock) { expectAllReduce(makeRingAllReduce); }

TEST(AlgorithmSimulation, RecursiveDoublingAllReduceSumsEveryElementForAnyRankCount) {
  // Recursive doubling sends whole buffers, so it is only used when they fit a channel.
  for (const Case& c : cases(false)) {
    if (c.count * 4 > 256) continue;
    simulate(makeRecursiveDoublingAllReduce, c, c.count, c.count, [&](int r, const auto& out, const auto& in) {
      for (size_t i = 0; i < c.count; i++) {
        int32_t want = 0;
        for (int p = 0; p < c.n; p++) want += in[p][i];
        ASSERT_EQ(out[i], want) << "rank " << r << " n " << c.n;
      }
    });
  }
}

TEST(AlgorithmSimulation, RingReduceScatterLeavesEachRankItsReducedBlock) {
  for (const Case& c : cases(false)) {
    simulate(makeRingReduceScatter, c, c.count * c.n, c.count, [&](int r, const auto& out, const auto& in) {
      for (size_t i = 0; i < c.count; i++) {
        int32_t want = 0;
        for (int p = 0; p < c.n; p++) want += in[p][r * c.count + i];
        ASSERT_EQ(out[i], want) << "rank " << r << " n " << c.n;
      }
    });
  }
}

TEST(AlgorithmSimulation, RingAllGatherPlacesEveryRanksBlock) {
  for (const Case& c : cases(false)) {
    simulate(makeRingAllGather, c, c.count, c.count * c.n, [&](int r, const auto& out, const auto& in) {
      for (int p = 0; p < c.n; p++)
        for (size_t i = 0; i < c.count; i++) ASSERT_EQ(out[p * c.count + i], in[p][i]) << "rank " << r;
    });
  }
}

void expectBroadcast(const Factory& f) {
  for (const Case& c : cases(true)) {
    simulate(f, c, c.count, c.count, [&](int r, const auto& out, const auto& in) {
      for (size_t i = 0; i < c.count; i++) ASSERT_EQ(out[i], in[c.root][i]) << "rank " << r << " root " << c.root;
    });
  }
}

TEST(AlgorithmSimulation, RingBroadcastCopiesTheRootsBufferEverywhere) { expectBroadcast(makeRingBroadcast); }
TEST(AlgorithmSimulation, DirectBroadcastCopiesTheRootsBufferEverywhere) { expectBroadcast(makeDirectBroadcast); }

void expectReduce(const Factory& f) {
  for (const Case& c : cases(true)) {
    simulate(f, c, c.count, c.count, [&](int r, const auto& out, const auto& in) {
      if (r != c.root) return;
      for (size_t i = 0; i < c.count; i++) {
        int32_t want = 0;
        for (int p = 0; p < c.n; p++) want += in[p][i];
        ASSERT_EQ(out[i], want) << "root " << c.root << " n " << c.n;
      }
    });
  }
}

TEST(AlgorithmSimulation, ChainReduceDeliversTheSumToTheRoot) { expectReduce(makeChainReduce); }
TEST(AlgorithmSimulation, DirectReduceDeliversTheSumToTheRoot) { expectReduce(makeDirectReduce); }

TEST(AlgorithmSimulation, GatherAndScatterMoveEachBlockToItsRank) {
  for (const Case& c : cases(true)) {
    simulate(makeDirectGather, c, c.count, c.count * c.n, [&](int r, const auto& out, const auto& in) {
      if (r != c.root) return;
      for (int p = 0; p < c.n; p++)
        for (size_t i = 0; i < c.count; i++) ASSERT_EQ(out[p * c.count + i], in[p][i]);
    });
    simulate(makeDirectScatter, c, c.count * c.n, c.count, [&](int r, const auto& out, const auto& in) {
      for (size_t i = 0; i < c.count; i++) ASSERT_EQ(out[i], in[c.root][r * c.count + i]);
    });
  }
}

}  // namespace
}  // namespace accl
