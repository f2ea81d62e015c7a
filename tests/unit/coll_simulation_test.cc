// Simulates every algorithm's plans for n ranks in one thread over small in-memory
// channels: checks results against a direct computation and that no plan can deadlock when
// a channel holds only a few pieces (the planner's real invariant: piece <= channel / 4).
#include <gtest/gtest.h>
#include <algorithm>
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
                  check,
              size_t boardBytes = World::kBoardBytes) {
  const size_t piece = 64;                  // bytes
  World world(c.n, 4 * piece, boardBytes);  // the planner keeps channels >= 4 pieces
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

void expectAllReduceOn(const Factory& f, const std::vector<Case>& all) {
  for (const Case& c : all) {
    simulate(f, c, c.count, c.count, [&](int r, const std::vector<int32_t>& out, const auto& in) {
      for (size_t i = 0; i < c.count; i++) {
        int32_t want = 0;
        for (int p = 0; p < c.n; p++) want += in[p][i];
        ASSERT_EQ(out[i], want) << "rank " << r << " i " << i << " n " << c.n << " count " << c.count;
      }
    });
  }
}

void expectAllReduce(const Factory& f) { expectAllReduceOn(f, cases(false)); }

TEST(AlgorithmSimulation, RingAllReduceSumsEveryElementOnEveryRankWithoutDeadlock) { expectAllReduce(makeRingAllReduce); }

TEST(AlgorithmSimulation, RecursiveDoublingAllReduceSumsEveryElementForAnyRankCount) {
  // Recursive doubling sends whole buffers, so it is only used when they fit a channel. One
  // rank exchanges nothing and must still copy its input to its output.
  std::vector<Case> all = cases(false);
  all.push_back({1, 7, 0});
  for (const Case& c : all) {
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

TEST(AlgorithmSimulation, BinomialTreeAllReduceSumsEveryElementForAnyRankCountAndSize) {
  // No rank sends and receives at once: buffers larger than the channel (up to 4000 bytes
  // through 256) stream through it. One rank copies its input.
  std::vector<Case> all = cases(false);
  all.push_back({1, 7, 0});
  expectAllReduceOn(makeBinomialTreeAllReduce, all);
}

TEST(AlgorithmSimulation, BinomialTreeAllReduceFollowsTheRingOrder) {
  // 8 ranks placed round robin over 4 hosts: the ring (hence the tree) visits 0 4 | 1 5 | 2 6 | 3 7.
  static const int ring[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  static int pos[8];
  for (int p = 0; p < 8; p++) pos[ring[p]] = p;
  std::vector<std::pair<int, int>> edges;  // (sender, receiver) of every send step
  auto ordered = [&](const CollArgs& args) {
    CollArgs a = args;
    a.ringRanks = ring;
    a.ringPos = pos;
    auto steps = makeBinomialTreeAllReduce(a);
    auto list = std::make_unique<StepList>();
    Step st;
    while (steps->next(&st)) {
      if (st.kind == Step::Kind::Send) edges.emplace_back(a.rank, st.sendPeer);
      list->push(st);
    }
    return list;
  };
  std::vector<Case> eight;
  for (size_t count : {1, 97, 1000}) eight.push_back({8, count, 0});
  expectAllReduceOn(ordered, eight);
  // The reduce's first level pairs ring neighbours, the two ranks of each host (4 -> 0, 5 -> 1,
  // 6 -> 2, 7 -> 3), then hosts (1 -> 0, 3 -> 2, 2 -> 0); 2(N-1) messages per call.
  ASSERT_EQ(edges.size(), 3u * 14);
  for (auto [from, to] : {std::pair{4, 0}, {5, 1}, {6, 2}, {7, 3}, {1, 0}, {3, 2}, {2, 0}})
    EXPECT_NE(std::find(edges.begin(), edges.end(), std::pair{from, to}), edges.end()) << from << " -> " << to;
}

TEST(AlgorithmSimulation, FlatAllReduceSumsEveryElementForAnyRankCountAndSize) {
  // Every rank sends its whole input to the root before it receives: buffers larger than the
  // channel stream through it, the root taking the inputs one after another.
  std::vector<Case> all = cases(false);
  all.push_back({1, 7, 0});
  expectAllReduceOn(makeDirectAllReduce, all);
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

// Board capacities: whole inputs in one chunk, and 3 or 2 elements per chunk (inputs in many;
// sliced: slices of whole cache lines from 64 * n bytes, and some ranks' slices empty).
void expectBoardAllReduceSums(const Factory& f) {
  for (size_t boardBytes : {World::kBoardBytes, size_t{12}, size_t{9}})
    for (const Case& c : cases(false)) {
      simulate(
          f, c, c.count, c.count,
          [&](int r, const auto& out, const auto& in) {
            for (size_t i = 0; i < c.count; i++) {
              int32_t want = 0;
              for (int p = 0; p < c.n; p++) want += in[p][i];
              ASSERT_EQ(out[i], want) << "rank " << r << " n " << c.n << " board " << boardBytes;
            }
          },
          boardBytes);
    }
}

TEST(AlgorithmSimulation, ShmDirectAllReduceSumsEveryElementForAnyRankCountAndChunking) {
  expectBoardAllReduceSums(makeShmDirectAllReduce);
}
TEST(AlgorithmSimulation, ShmSlicedAllReduceSumsEveryElementForAnyRankCountAndChunking) {
  expectBoardAllReduceSums(makeShmSlicedAllReduce);
}

TEST(AlgorithmSimulation, ShmDirectAllGatherPlacesEveryRanksBlockForAnyChunking) {
  for (size_t boardBytes : {World::kBoardBytes, size_t{12}, size_t{9}})
    for (const Case& c : cases(false)) {
      simulate(
          makeShmDirectAllGather, c, c.count, c.count * c.n,
          [&](int r, const auto& out, const auto& in) {
            for (int p = 0; p < c.n; p++)
              for (size_t i = 0; i < c.count; i++)
                ASSERT_EQ(out[p * c.count + i], in[p][i]) << "rank " << r << " board " << boardBytes;
          },
          boardBytes);
    }
}

// Back-to-back board operations reuse each rank's two slots; ranks run at different speeds
// (rank r advances r+1 times per round), so fast ones post while slow ones still read.
// `kinds`: which ops fold whole (false) or in slices (true), cycled; sliced ops of 5 int32
// leave some ranks' slices empty, so those ranks publish without waiting for any post.
void backToBackBoardOps(const std::vector<bool>& kinds, bool inPlace) {
  constexpr int kOps = 7;
  for (int n : {2, 3, 5, 8}) {
    World world(n, 256);
    const size_t count = 5;
    std::vector<std::vector<std::vector<int32_t>>> in(n), out(n);
    std::vector<Lane> lanes(n);
    for (int r = 0; r < n; r++) {
      for (int k = 0; k < kOps; k++) {
        in[r].push_back(std::vector<int32_t>(count));
        for (size_t i = 0; i < count; i++) in[r][k][i] = (k + 1) * 100 + r * 10 + static_cast<int32_t>(i);
        out[r].push_back(inPlace ? in[r][k] : std::vector<int32_t>(count, -1));
      }
      for (int k = 0; k < kOps; k++) {
        CollArgs a;
        a.src = reinterpret_cast<const char*>(inPlace ? out[r][k].data() : in[r][k].data());
        a.dst = reinterpret_cast<char*>(out[r][k].data());
        a.count = count;
        a.type = ncclInt32;
        a.rank = r;
        a.nranks = n;
        lanes[r].add(kinds[k % kinds.size()] ? makeShmSlicedAllReduce(a) : makeShmDirectAllReduce(a));
      }
    }
    for (bool all = false; !all;) {
      all = true;
      bool moved = false;
      for (int r = 0; r < n; r++)
        for (int t = 0; t <= r && !lanes[r].finished(); t++) {
          ASSERT_EQ(lanes[r].advance(*world.comms[r], dev::StreamRef{}, &moved), ncclSuccess);
          all = all && lanes[r].finished();
        }
      for (int r = 0; r < n; r++) all = all && lanes[r].finished();
      ASSERT_TRUE(all || moved) << "deadlock with n=" << n;
    }
    for (int r = 0; r < n; r++)
      for (int k = 0; k < kOps; k++)
        for (size_t i = 0; i < count; i++) {
          int32_t want = 0;
          for (int p = 0; p < n; p++) want += in[p][k][i];
          ASSERT_EQ(out[r][k][i], want) << "rank " << r << " op " << k << " n " << n;
        }
  }
}

TEST(AlgorithmSimulation, ShmDirectOperationsBackToBackNeverReadAReusedSlot) { backToBackBoardOps({false}, false); }
TEST(AlgorithmSimulation, ShmSlicedOperationsBackToBackNeverReadAReusedSlot) {
  backToBackBoardOps({true}, false);
  backToBackBoardOps({true}, true);
}
TEST(AlgorithmSimulation, ShmSlicedAndWholeOperationsMixBackToBack) {
  backToBackBoardOps({true, false, false, true}, false);
  backToBackBoardOps({false, true}, true);
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
