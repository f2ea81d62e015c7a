// accl-sim's engine (sched/plan_sim.h) runs the library's own plans: the bytes it counts on each
// host's link are the closed forms of each algorithm (ring all-reduce 2(N-1)/N x S, HierRing
// 2(H-1)/H x S, ring all-gather/reduce-scatter (N-1) blocks, HierRing (H-1) x L blocks), its
// times follow the link model's bounds, and where the tuner's cost model makes a clear choice
// the plans run fastest with the same algorithm.
#include <gtest/gtest.h>
#include <cmath>
#include <tuple>
#include "sched/coll_plan.h"
#include "sched/cost_model.h"
#include "sched/plan_sim.h"

namespace accl {
namespace {

SimCluster cluster(int hosts, int perHost, bool roundRobin, const LinkCosts& links, int nics = 1, int pods = 1) {
  std::vector<uint64_t> host(hosts * perHost), pod(hosts * perHost);
  for (int r = 0; r < hosts * perHost; r++) {
    const int h = roundRobin ? r % hosts : r / perHost;
    host[r] = static_cast<uint64_t>(h);
    pod[r] = static_cast<uint64_t>(h / (hosts / pods));
  }
  SimCluster c;
  c.layout = topo::layoutRanks(host, pod);
  c.nicsPerHost = nics;
  c.links = links;
  return c;
}

SimResult run(const SimCluster& c, OpKind kind, Algo algo, size_t bytes) {
  SimResult r = simulatePlans(c, simOpFor(kind, algo, bytes, c.layout));
  EXPECT_TRUE(r.ok) << r.error;
  return r;
}

// Fast hosts, 10 us and 1 GB/s between them.
const LinkCosts kLinks{{1, 100}, {10, 1}};

TEST(PlanSim, RingAllReduceSendsTwoNMinusOneOverNOfTheBufferThroughEveryHostsLink) {
  for (auto [hosts, perHost, rr] : {std::tuple{4, 2, true}, {4, 2, false}, {8, 1, false}, {2, 4, true}}) {
    const SimCluster c = cluster(hosts, perHost, rr, kLinks);
    const int n = hosts * perHost;
    const size_t s = size_t{1} << 20;
    const SimResult r = run(c, OpKind::AllReduce, Algo::Ring, s);
    for (int h = 0; h < hosts; h++) {
      EXPECT_EQ(r.hostSent[h], 2 * (n - 1) * s / n) << hosts << "x" << perHost << " host " << h;
      EXPECT_EQ(r.hostRecv[h], 2 * (n - 1) * s / n) << hosts << "x" << perHost << " host " << h;
    }
    // The other N-H ring edges stay inside hosts, each with the same bytes.
    EXPECT_EQ(r.intraBytes, static_cast<uint64_t>(n - hosts) * 2 * (n - 1) * s / n);
  }
}

TEST(PlanSim, HierRingSendsTwoHMinusOneOverHOfTheBufferAndGathersAndScattersHMinusOneTimesLBlocks) {
  for (auto [hosts, perHost, rr] : {std::tuple{4, 2, true}, {4, 2, false}, {2, 4, true}, {8, 4, false}}) {
    const SimCluster c = cluster(hosts, perHost, rr, kLinks);
    const int n = hosts * perHost;
    const size_t s = size_t{1} << 20;
    const SimResult ar = run(c, OpKind::AllReduce, Algo::HierRing, s);
    const SimResult ag = run(c, OpKind::AllGather, Algo::HierRing, s);
    const SimResult rs = run(c, OpKind::ReduceScatter, Algo::HierRing, s);
    const SimResult ringAg = run(c, OpKind::AllGather, Algo::Ring, s);
    const SimResult ringRs = run(c, OpKind::ReduceScatter, Algo::Ring, s);
    for (int h = 0; h < hosts; h++) {
      EXPECT_EQ(ar.hostSent[h], 2 * (hosts - 1) * s / hosts) << hosts << "x" << perHost;
      EXPECT_EQ(ag.hostRecv[h], static_cast<uint64_t>(hosts - 1) * perHost * s) << hosts << "x" << perHost;
      EXPECT_EQ(rs.hostSent[h], static_cast<uint64_t>(hosts - 1) * perHost * s) << hosts << "x" << perHost;
      EXPECT_EQ(ringAg.hostRecv[h], static_cast<uint64_t>(n - 1) * s) << hosts << "x" << perHost;
      EXPECT_EQ(ringRs.hostSent[h], static_cast<uint64_t>(n - 1) * s) << hosts << "x" << perHost;
    }
  }
}

TEST(PlanSim, BinomialTreeSendsOneBufferPerHostAndLevelAndTakesTwiceTheDoublingsLevels) {
  // 4 hosts x 2 placed round robin: the tree follows the ring, so its first level stays inside
  // the hosts; three buffers cross hosts going up (host 1 -> 0, 3 -> 2, then 2 -> 0) and
  // three come back down: 6 S in all.
  const SimCluster c = cluster(4, 2, true, kLinks);
  const size_t s = 4096;
  SimOp op = simOpFor(OpKind::AllReduce, Algo::Tree, s, c.layout, TreeShape::Binomial);
  const SimResult bin = simulatePlans(c, op);
  ASSERT_TRUE(bin.ok) << bin.error;
  uint64_t across = 0;
  for (uint64_t b : bin.hostSent) across += b;
  EXPECT_EQ(across, 6 * s);
  EXPECT_EQ(bin.intraBytes, 2 * 4 * s);  // each host's pair: one reduce, one broadcast
  // With latency alone (8 B), six levels against doubling's three.
  const SimCluster lat = cluster(8, 1, false, kLinks);
  const SimResult b8 = simulatePlans(lat, simOpFor(OpKind::AllReduce, Algo::Tree, 8, lat.layout, TreeShape::Binomial));
  const SimResult d8 = simulatePlans(lat, simOpFor(OpKind::AllReduce, Algo::Tree, 8, lat.layout));
  ASSERT_TRUE(b8.ok && d8.ok) << b8.error << d8.error;
  EXPECT_NEAR(b8.us / d8.us, 2.0, 0.1);
}

TEST(PlanSim, PodUplinksCarryOneRingEdgeEach) {
  const SimCluster c = cluster(8, 2, true, kLinks, 1, 4);
  const size_t s = size_t{4} << 20;
  const SimResult r = run(c, OpKind::AllReduce, Algo::Ring, s);
  ASSERT_EQ(r.podSent.size(), 4u);
  for (uint64_t b : r.podSent) EXPECT_EQ(b, 2 * 15 * s / 16);
}

TEST(PlanSim, TimesFollowTheLinkBounds) {
  // Bandwidth-bound: a ring all-reduce across 8 hosts of one rank takes 2(N-1)/N x S at the
  // NIC's rate, plus one hop of latency per step, within a few percent.
  const SimCluster c = cluster(8, 1, false, kLinks);
  const size_t s = size_t{64} << 20;
  const double wire = 2.0 * 7 / 8 * s / 1e3;  // us at 1 GB/s
  const SimResult ring = run(c, OpKind::AllReduce, Algo::Ring, s);
  EXPECT_GT(ring.us, wire);
  EXPECT_LT(ring.us, 1.05 * wire) << ring.us;
  // Latency-bound: 8 B by recursive doubling is log2(8) = 3 exchanges of one hop each; the ring
  // takes more hops (its steps with bytes: 2 slices of one float each).
  const SimResult tree = run(c, OpKind::AllReduce, Algo::Tree, 8);
  EXPECT_NEAR(tree.us, 3 * 10.0, 0.5);
  EXPECT_GT(run(c, OpKind::AllReduce, Algo::Ring, 8).us, 1.6 * tree.us);
  // With N floats every one of the ring's 2(N-1) steps has bytes: 14 hops.
  EXPECT_NEAR(run(c, OpKind::AllReduce, Algo::Ring, 8 * 4).us, 14 * 10.0, 1.0);
}

// The fastest plan among Ring, Tree and HierRing, by the simulator.
Algo fastest(const SimCluster& c, OpKind kind, size_t bytes, double* margin) {
  Algo best = Algo::Ring;
  double bestUs = -1, second = -1;
  for (Algo a : {Algo::Ring, Algo::Tree, Algo::HierRing}) {
    if (a == Algo::Tree && kind != OpKind::AllReduce) continue;
    if (a == Algo::HierRing && !hierRingRuns(kind, c.layout)) continue;
    const double us = run(c, kind, a, bytes).us;
    if (bestUs < 0 || us < bestUs) {
      second = bestUs;
      bestUs = us;
      best = a;
    } else if (second < 0 || us < second) {
      second = us;
    }
  }
  *margin = second / bestUs;
  return best;
}

TEST(PlanSim, AgreesWithTheCostModelsClearChoices) {
  struct Case {
    const char* what;
    int hosts, perHost, nics;
    LinkCosts links;
    OpKind kind;
    size_t bytes;
    Algo want;
  };
  // Hosts with fast copies and 8 NICs of 100 Gbit/s.
  const LinkCosts nvlinkHosts{{3, 150}, {10, 12.5}};
  const Case cases[] = {
      {"8 B, 8 hosts x 1, measured links", 8, 1, 1, measuredLinks(), OpKind::AllReduce, 8, Algo::Tree},
      {"8 B, 4 hosts x 2, measured links", 4, 2, 1, measuredLinks(), OpKind::AllReduce, 8, Algo::Tree},
      {"64 MiB, 4 hosts x 2, measured links", 4, 2, 1, measuredLinks(), OpKind::AllReduce, 64 << 20, Algo::Ring},
      {"64 MiB, 8 hosts x 1, measured links", 8, 1, 1, measuredLinks(), OpKind::AllReduce, 64 << 20, Algo::Ring},
      {"64 MiB, 16 hosts x 8, 8 NICs", 16, 8, 8, nvlinkHosts, OpKind::AllReduce, 64 << 20, Algo::HierRing},
      {"8 B, 16 hosts x 8, 8 NICs", 16, 8, 8, nvlinkHosts, OpKind::AllReduce, 8, Algo::Tree},
      {"all-gather 1 MiB per rank, 16 hosts x 8, 8 NICs", 16, 8, 8, nvlinkHosts, OpKind::AllGather, 1 << 20,
       Algo::HierRing},
      {"reduce-scatter 1 MiB per rank, 16 hosts x 8, 8 NICs", 16, 8, 8, nvlinkHosts, OpKind::ReduceScatter,
       1 << 20, Algo::HierRing},
      // On the measured pods copies are cheap and large reductions are not: HierRing's
      // all-gather (a host phase of copies) wins, its reduce-scatter (of reductions) loses.
      {"all-gather 8 MiB per rank, 4 hosts x 2, measured links", 4, 2, 1, measuredLinks(), OpKind::AllGather,
       8 << 20, Algo::HierRing},
      {"reduce-scatter 8 MiB per rank, 4 hosts x 2, measured links", 4, 2, 1, measuredLinks(),
       OpKind::ReduceScatter, 8 << 20, Algo::Ring},
  };
  for (const Case& k : cases) {
    const SimCluster c = cluster(k.hosts, k.perHost, false, k.links, k.nics);
    TopoShape shape{k.hosts, k.perHost};
    shape.nicsPerHost = k.nics;
    std::string why;
    const Algo model =
        cheapestAlgo(k.kind, kAlgoRing | kAlgoTree | kAlgoHierRing, k.bytes, k.hosts * k.perHost, shape, k.links, &why);
    double margin = 0;
    const Algo sim = fastest(c, k.kind, k.bytes, &margin);
    EXPECT_EQ(model, k.want) << k.what << ": " << why;
    EXPECT_EQ(sim, k.want) << k.what << ": the plans run fastest with " << algoName(sim) << " (margin " << margin
                           << "); model: " << why;
    EXPECT_GT(margin, 1.1) << k.what << ": not a clear choice";
  }
}

TEST(PlanSim, ReportsPlansThatLeaveBytesBehindOrRunOutOfSteps) {
  const SimCluster c = cluster(4, 2, true, kLinks);
  const SimResult r = simulatePlans(c, simOpFor(OpKind::AllReduce, Algo::Ring, 1 << 20, c.layout), 10);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("more than 10 steps"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace accl
