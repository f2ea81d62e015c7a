// The ring order that follows the hosts (topo/rank_layout.h) and the ring algorithms run in
// it: for round-robin, blocked, uneven and shuffled placements the ring crosses each host
// boundary exactly once, every collective's result is exact (checked against a direct
// computation, in the in-memory world of coll_simulation_test), and the bytes each host sends
// to other hosts are the ordered ring's optimum (all-reduce: 2(N-1)/N of the buffer).
#include <gtest/gtest.h>
#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include "coll/algorithms.h"
#include "topo/rank_layout.h"
#include "unit/mem_world.h"

namespace accl {
namespace {

struct Placement {
  const char* name;
  std::vector<uint64_t> hostOf;  // by rank
};

std::vector<Placement> placements() {
  std::vector<Placement> v;
  auto roundRobin = [](int hosts, int perHost) {
    std::vector<uint64_t> h;
    for (int r = 0; r < hosts * perHost; r++) h.push_back(1000 + r % hosts);
    return h;
  };
  auto blocked = [](int hosts, int perHost) {
    std::vector<uint64_t> h;
    for (int r = 0; r < hosts * perHost; r++) h.push_back(2000 + r / perHost);
    return h;
  };
  v.push_back({"round robin 4x2", roundRobin(4, 2)});
  v.push_back({"round robin 3x3", roundRobin(3, 3)});
  v.push_back({"round robin 2x4", roundRobin(2, 4)});
  v.push_back({"blocked 4x2", blocked(4, 2)});
  v.push_back({"one host", blocked(1, 5)});
  v.push_back({"one rank per host", roundRobin(6, 1)});
  v.push_back({"uneven", {7, 7, 9, 7, 8, 9, 7}});
  std::mt19937 rng(25);
  std::vector<uint64_t> shuffled = roundRobin(3, 3);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  v.push_back({"shuffled 3x3", shuffled});
  return v;
}

TEST(RankLayout, RingVisitsEachHostOnceWithItsRanksAscending) {
  for (const Placement& p : placements()) {
    topo::RankLayout l = topo::layoutRanks(p.hostOf);
    const int n = static_cast<int>(p.hostOf.size());
    std::set<uint64_t> hosts(p.hostOf.begin(), p.hostOf.end());
    ASSERT_EQ(l.nhosts, static_cast<int>(hosts.size())) << p.name;
    std::vector<int> sorted = l.ring;
    std::sort(sorted.begin(), sorted.end());
    for (int r = 0; r < n; r++) {
      ASSERT_EQ(sorted[r], r) << p.name << ": not a permutation";
      ASSERT_EQ(l.ring[l.ringPos[r]], r) << p.name;
    }
    EXPECT_EQ(l.hostCrossings(), l.nhosts > 1 ? l.nhosts : 0) << p.name << ": " << l.describe();
    // Each host's ranks are one run of the ring, ascending.
    std::set<uint64_t> seen;
    for (int pos = 0; pos < n; pos++) {
      const uint64_t h = p.hostOf[l.ring[pos]];
      if (pos > 0 && h == p.hostOf[l.ring[pos - 1]]) {
        EXPECT_LT(l.ring[pos - 1], l.ring[pos]) << p.name;
      } else {
        EXPECT_TRUE(seen.insert(h).second) << p.name << ": host visited twice: " << l.describe();
      }
    }
  }
}

TEST(RankLayout, RankOrderIsKeptWhenItAlreadyFollowsTheHosts) {
  EXPECT_TRUE(topo::layoutRanks({5, 5, 6, 6}).inRankOrder);
  EXPECT_FALSE(topo::layoutRanks({5, 6, 5, 6}).inRankOrder);
  topo::RankLayout l = topo::layoutRanks({5, 6, 5, 6});
  EXPECT_EQ(l.describe(), "0 2 | 1 3");
}

TEST(RankLayout, PodsKeepTheirHostsTogether) {
  // 2 pods x 2 hosts x 1 rank, hosts numbered so that rank order alternates pods.
  topo::RankLayout l = topo::layoutRanks({10, 20, 11, 21}, {1, 2, 1, 2});
  EXPECT_EQ(l.npods, 2);
  EXPECT_EQ(l.ring, (std::vector<int>{0, 2, 1, 3}));
}

// ---- the ring algorithms in the layout's order --------------------------------------------

using Factory = std::function<std::unique_ptr<StepSource>(const CollArgs&)>;
using Adder = std::function<void(Lane&, const CollArgs&)>;
Adder one(const Factory& f) {
  return [f](Lane& lane, const CollArgs& a) { lane.add(f(a)); };
}
int32_t input(int rank, size_t i) { return static_cast<int32_t>(rank * 1000 + i % 977); }

// Runs `factory` on every rank in the ring order of `l`; returns bytes sent by rank a to rank b
// in sent[a][b]. in/out sizes in elements.
void simulate(const Adder& add, const topo::RankLayout& l, size_t count, int root, size_t inElems,
              size_t outElems, std::vector<std::vector<int32_t>>* in, std::vector<std::vector<int32_t>>* out,
              std::vector<std::vector<uint64_t>>* sent) {
  const int n = static_cast<int>(l.ring.size());
  const size_t piece = 64;
  World world(n, 4 * piece);
  in->assign(n, std::vector<int32_t>(inElems));
  out->assign(n, std::vector<int32_t>(outElems, -7));
  std::vector<Lane> lanes(n);
  for (int r = 0; r < n; r++) {
    for (size_t i = 0; i < inElems; i++) (*in)[r][i] = input(r, i);
    CollArgs a;
    a.src = reinterpret_cast<const char*>((*in)[r].data());
    a.dst = reinterpret_cast<char*>((*out)[r].data());
    a.count = count;
    a.type = ncclInt32;
    a.root = root;
    a.rank = r;
    a.nranks = n;
    a.pieceBytes = piece;
    a.ringRanks = l.ring.data();
    a.ringPos = l.ringPos.data();
    add(lanes[r], a);
  }
  ASSERT_TRUE(world.run(lanes)) << "deadlock with n=" << n;
  sent->assign(n, std::vector<uint64_t>(n, 0));
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++)
      if (a != b) (*sent)[a][b] = world.ring(a, b)->tail;
}

// Bytes each host sends to other hosts.
std::vector<uint64_t> hostEgress(const topo::RankLayout& l, const std::vector<std::vector<uint64_t>>& sent) {
  std::vector<uint64_t> e(l.nhosts, 0);
  const int n = static_cast<int>(sent.size());
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++)
      if (l.hostOf[a] != l.hostOf[b]) e[l.hostOf[a]] += sent[a][b];
  return e;
}

int32_t sumAt(const std::vector<std::vector<int32_t>>& in, size_t i) {
  int32_t s = 0;
  for (const auto& v : in) s += v[i];
  return s;
}

TEST(RingInHostOrder, AllReduceIsExactAndEachHostSendsTheOptimum) {
  for (const Placement& p : placements()) {
    topo::RankLayout l = topo::layoutRanks(p.hostOf);
    const int n = static_cast<int>(p.hostOf.size());
    for (size_t count : {size_t{1}, size_t{97}, size_t{64} * n}) {
      std::vector<std::vector<int32_t>> in, out;
      std::vector<std::vector<uint64_t>> sent;
      simulate(one(makeRingAllReduce), l, count, 0, count, count, &in, &out, &sent);
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++) ASSERT_EQ(out[r][i], sumAt(in, i)) << p.name << " rank " << r;
      if (count % n != 0 || l.nhosts == 1) continue;
      // Ordered ring: one edge out of each host, carrying 2(N-1)/N of the buffer.
      const uint64_t optimum = 2 * (n - 1) * count * 4 / n;
      for (uint64_t e : hostEgress(l, sent)) EXPECT_EQ(e, optimum) << p.name;
    }
  }
}

TEST(RingInHostOrder, RankOrderRingOnRoundRobinHostsSendsRanksPerHostTimesMore) {
  // The reason for the order: the same all-reduce in rank order on 4 hosts x 2 ranks round robin.
  topo::RankLayout rankOrder = topo::layoutRanks(std::vector<uint64_t>(8, 1));
  topo::RankLayout hosts = topo::layoutRanks(placements()[0].hostOf);
  rankOrder.hostOf = hosts.hostOf;
  rankOrder.nhosts = hosts.nhosts;
  const size_t count = 64 * 8;
  std::vector<std::vector<int32_t>> in, out;
  std::vector<std::vector<uint64_t>> a, b;
  simulate(one(makeRingAllReduce), rankOrder, count, 0, count, count, &in, &out, &a);
  simulate(one(makeRingAllReduce), hosts, count, 0, count, count, &in, &out, &b);
  std::vector<uint64_t> ea = hostEgress(rankOrder, a), eb = hostEgress(hosts, b);
  for (int h = 0; h < 4; h++) EXPECT_EQ(ea[h], 2 * eb[h]) << "host " << h;
}

TEST(RingInHostOrder, AllGatherAndReduceScatterPlaceEveryRanksBlock) {
  for (const Placement& p : placements()) {
    topo::RankLayout l = topo::layoutRanks(p.hostOf);
    const int n = static_cast<int>(p.hostOf.size());
    for (size_t count : {size_t{1}, size_t{37}, size_t{48}}) {
      std::vector<std::vector<int32_t>> in, out;
      std::vector<std::vector<uint64_t>> sent;
      simulate(one(makeRingAllGather), l, count, 0, count, count * n, &in, &out, &sent);
      for (int r = 0; r < n; r++)
        for (int q = 0; q < n; q++)
          for (size_t i = 0; i < count; i++) ASSERT_EQ(out[r][q * count + i], in[q][i]) << p.name << " rank " << r;
      // Channels carry pieces padded to alignment: bytes are exact for whole 64-byte pieces.
      if (l.nhosts > 1 && count * 4 % 64 == 0) {
        for (uint64_t e : hostEgress(l, sent)) EXPECT_EQ(e, (n - 1) * count * 4) << p.name;
      }
      simulate(one(makeRingReduceScatter), l, count, 0, count * n, count, &in, &out, &sent);
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++) {
          int32_t want = 0;
          for (int q = 0; q < n; q++) want += in[q][r * count + i];
          ASSERT_EQ(out[r][i], want) << p.name << " rank " << r;
        }
    }
  }
}

TEST(RingInHostOrder, BroadcastAndReduceReachEveryRankFromAnyRoot) {
  for (const Placement& p : placements()) {
    topo::RankLayout l = topo::layoutRanks(p.hostOf);
    const int n = static_cast<int>(p.hostOf.size());
    for (int root : {0, n - 1, n / 2}) {
      const size_t count = 53;
      std::vector<std::vector<int32_t>> in, out;
      std::vector<std::vector<uint64_t>> sent;
      simulate(one(makeRingBroadcast), l, count, root, count, count, &in, &out, &sent);
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++) ASSERT_EQ(out[r][i], in[root][i]) << p.name << " root " << root;
      // A chain: at most one host boundary crossed per host (into it), none twice.
      for (uint64_t e : hostEgress(l, sent)) EXPECT_LE(e, count * 4) << p.name;
      simulate(one(makeChainReduce), l, count, root, count, count, &in, &out, &sent);
      for (size_t i = 0; i < count; i++) ASSERT_EQ(out[root][i], sumAt(in, i)) << p.name << " root " << root;
      for (uint64_t e : hostEgress(l, sent)) EXPECT_LE(e, count * 4) << p.name;
    }
  }
}

TEST(HierarchicalAllReduce, IsExactAndEachHostSendsTwoHMinusOneOverHOfTheBuffer) {
  for (const Placement& p : placements()) {
    topo::RankLayout l = topo::layoutRanks(p.hostOf);
    if (!l.uniform) continue;
    const int n = static_cast<int>(p.hostOf.size()), hosts = l.nhosts;
    auto hier = [&l](Lane& lane, const CollArgs& a) {
      for (auto& phase : makeHierarchicalAllReduce(a, l)) lane.add(std::move(phase));
    };
    for (size_t count : {size_t{1}, size_t{5}, size_t{97}, size_t{16} * n}) {
      std::vector<std::vector<int32_t>> in, out;
      std::vector<std::vector<uint64_t>> sent;
      simulate(hier, l, count, 0, count, count, &in, &out, &sent);
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++) ASSERT_EQ(out[r][i], sumAt(in, i)) << p.name << " rank " << r << " count " << count;
      if (count % (16 * n) != 0 || hosts == 1) continue;
      const uint64_t optimum = 2 * (hosts - 1) * count * 4 / hosts;
      for (uint64_t e : hostEgress(l, sent)) EXPECT_EQ(e, optimum) << p.name;
    }
    // In place (the buffers the phases share) as well.
    std::vector<std::vector<int32_t>> in, out;
    std::vector<std::vector<uint64_t>> sent;
    const size_t count = 41;
    auto inPlace = [&](Lane& lane, const CollArgs& a) {
      CollArgs b = a;
      std::memcpy(b.dst, b.src, count * 4);
      b.src = b.dst;
      hier(lane, b);
    };
    simulate(inPlace, l, count, 0, count, count, &in, &out, &sent);
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++) ASSERT_EQ(out[r][i], sumAt(in, i)) << p.name << " in place, rank " << r;
  }
}

TEST(HierarchicalAllGather, IsExactAndEachHostSendsHMinusOneTimesItsRanksBlocks) {
  for (const Placement& p : placements()) {
    topo::RankLayout l = topo::layoutRanks(p.hostOf);
    if (!l.uniform || l.nhosts < 2 || l.ranksPerHost() < 2) continue;
    const int n = static_cast<int>(p.hostOf.size()), hosts = l.nhosts, perHost = l.ranksPerHost();
    auto hier = [&l](Lane& lane, const CollArgs& a) {
      for (auto& phase : makeHierarchicalAllGather(a, l)) lane.add(std::move(phase));
    };
    for (size_t count : {size_t{1}, size_t{5}, size_t{37}, size_t{48}}) {
      std::vector<std::vector<int32_t>> in, out;
      std::vector<std::vector<uint64_t>> sent;
      simulate(hier, l, count, 0, count, count * n, &in, &out, &sent);
      for (int r = 0; r < n; r++)
        for (int q = 0; q < n; q++)
          for (size_t i = 0; i < count; i++)
            ASSERT_EQ(out[r][q * count + i], in[q][i])
                << p.name << " rank " << r << " block " << q << " count " << count;
      if (count * 4 % 64 != 0) continue;
      // Each of the host's ranks receives the blocks of its peers on the other hosts, once.
      for (uint64_t e : hostEgress(l, sent)) EXPECT_EQ(e, uint64_t(hosts - 1) * perHost * count * 4) << p.name;
    }
    // In place: each rank's input is its own block of the output.
    const size_t count = 29;
    std::vector<std::vector<int32_t>> in, out;
    std::vector<std::vector<uint64_t>> sent;
    auto inPlace = [&](Lane& lane, const CollArgs& a) {
      CollArgs b = a;
      char* own = b.dst + static_cast<size_t>(b.rank) * count * 4;
      std::memcpy(own, b.src, count * 4);
      b.src = own;
      hier(lane, b);
    };
    simulate(inPlace, l, count, 0, count, count * n, &in, &out, &sent);
    for (int r = 0; r < n; r++)
      for (int q = 0; q < n; q++)
        for (size_t i = 0; i < count; i++) ASSERT_EQ(out[r][q * count + i], in[q][i]) << p.name << " in place";
  }
}

TEST(HierarchicalReduceScatter, IsExactAndEachHostSendsHMinusOneTimesItsRanksBlocks) {
  for (const Placement& p : placements()) {
    topo::RankLayout l = topo::layoutRanks(p.hostOf);
    if (!l.uniform || l.nhosts < 2 || l.ranksPerHost() < 2) continue;
    const int n = static_cast<int>(p.hostOf.size()), hosts = l.nhosts, perHost = l.ranksPerHost();
    for (bool inPlace : {false, true}) {
      for (size_t count : {size_t{1}, size_t{5}, size_t{37}, size_t{48}}) {
        std::vector<std::vector<char>> scratch(n);
        auto hier = [&](Lane& lane, const CollArgs& a) {
          CollArgs b = a;
          // NCCL's in-place reduce-scatter: the output is the rank's block of the input.
          if (inPlace) b.dst = const_cast<char*>(b.src) + static_cast<size_t>(b.rank) * count * 4;
          scratch[b.rank].assign(count * 4 * l.nhosts, 0);
          for (auto& phase : makeHierarchicalReduceScatter(b, l, scratch[b.rank].data())) lane.add(std::move(phase));
        };
        std::vector<std::vector<int32_t>> in, out;
        std::vector<std::vector<uint64_t>> sent;
        simulate(hier, l, count, 0, count * n, count, &in, &out, &sent);
        // The references: every rank's input as it was (simulate fills `in` before the plans run).
        std::vector<std::vector<int32_t>> orig(n, std::vector<int32_t>(count * n));
        for (int r = 0; r < n; r++)
          for (size_t i = 0; i < count * n; i++) orig[r][i] = input(r, i);
        for (int r = 0; r < n; r++)
          for (size_t i = 0; i < count; i++) {
            int32_t want = 0;
            for (int q = 0; q < n; q++) want += orig[q][r * count + i];
            const int32_t got = inPlace ? in[r][r * count + i] : out[r][i];
            ASSERT_EQ(got, want) << p.name << (inPlace ? " in place" : "") << " rank " << r << " count " << count;
          }
        if (inPlace || count * 4 % 64 != 0) continue;
        for (uint64_t e : hostEgress(l, sent)) EXPECT_EQ(e, uint64_t(hosts - 1) * perHost * count * 4) << p.name;
      }
    }
  }
}

}  // namespace
}  // namespace accl
