// cost_model.cc: alpha-beta costs of the all-reduce algorithms across hosts.
//
// Figures measured on the netns pods of tests/netns (veth pairs through a bridge, hpn0 shaped
// with tbf to 2 Gbit/s, 2 vCPUs shared by every rank), with perf/pods_topo_bench.sh (build dir,
// any baseline dir), best of 2 rounds, 16:55-17:05 UTC 2026-12-01:
//   inter latency 50 us: PODS=2 PER_POD=1 MIN=8 MAX=8 ITERS=500 VARIANTS="ours:Ring ours:Tree":
//     Tree (one exchange) 43-51 us, Ring (2 steps) 141-256 us;
//   inter bandwidth 0.24 GB/s: 2 Gbit/s less TCP/IP headers; the ordered ring's 2(N-1)/N x S
//     over each pod link matched it (4 pods x 2 ranks, NCCL_ALGO=Ring, 16-128 MiB: 122 ms,
//     245 ms, 495 ms, 1028 ms; the model says 123, 246, 490, 980);
//   intra latency 3 us: PODS=1 PER_POD=2 MIN=8 MAX=8: Tree 5.2 us, Ring (2 steps) 5.9 us;
//   intra bandwidth 0.3 GB/s: PODS=1 PER_POD=2 MIN=64M MAX=64M: 67 ms (1.0 GB/s busbw) with 2
//     ranks on the 2 vCPUs; the 8 ranks of 4 pods x 2 share them, a quarter each, and 0.3 GB/s
//     is what NCCL_ALGO=HierRing ran at there (128 MiB best 1.23 s, of which 0.80 s on the
//     links). This is why the tuner keeps the ring on these pods for large buffers: HierRing's
//     host phases do not overlap its network phase, and CPU, not the link, is short here;
//   copies at 4 GB/s at any size: COLL=all_gather MIN=256K MAX=32M ITERS=5 VARIANTS="ours:Ring
//     ours:HierRing" (4 pods x 2, 19:59 UTC): HierRing's all-gather, whose host phase only copies,
//     ran 109-115 ms at 32 MiB, what its link phase alone takes (105 ms), 1.12-1.16x the ring
//     from 4 MiB; its reduce-scatter, whose host phase reduces 32 MiB of input into scratch,
//     ran 170-207 ms against the ring's 123-125 ms (0.72x), as 0.3 GB/s reductions predict;
//   cached intra bandwidth 4 GB/s up to 4 MiB: MIN=1M MAX=4M VARIANTS="ours:Ring
//     ours:HierRing" (4 pods x 2): HierRing 6.5 ms at 1 MiB, 27.6 ms at 4 MiB, what its link
//     phase alone takes (6.85, 26.5 ms): buffers that stay in cache cost the host phases little,
//     and HierRing beats the ring there (1.13-1.17x at 1-4 MiB).
//   message 8 us of one rank's CPU per small message sent or received between hosts: `perf
//     trace -s` on the root of an 8 B all-reduce, ACCL_TREE_SHAPE=flat, 8 pods x 1 rank
//     (2026-12-03): sendto 11-14 us, recvfrom 5-7 us each, perf trace's own cost included;
//   crowding (ranks of one kernel outnumbering its cores, crowding() below), 8 pods x 1 rank
//     on the 2 vCPUs, 8 B, interleaved, ITERS=2000 (2026-12-03): ring (2 messages a step)
//     317-508 us, 14 steps; 2-16 KiB (8 a step) 830-1340 us; recursive doubling (8 a
//     round, 3 rounds) 198-395 us; binomial (levels of 4, 2, 1) 147-249 us; flat 138-228 us:
//       PODS=8 PER_POD=1 MIN=8 MAX=8 ITERS=2000 ROUNDS=6
//         VARIANTS="ours:Tree:flat ours:Tree:binomial ours:Ring" perf/pods_topo_bench.sh build build/lib
//     and 4 pods x 2 ranks: ring 216-237 us, binomial 95-120, flat 135-153, doubling 148-171.
// The tuner compares algorithms with these; a machine with real NICs and cores has other
// figures (accl-sim takes them as options).
#include "sched/cost_model.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include "coll/algo_policy.h"

namespace accl {

const LinkCosts& measuredLinks() {
  static const LinkCosts links{{3.0, 0.3}, {50.0, 0.24}, 0, 4 << 20, 4.0, 8.0};
  return links;
}

namespace {

// The plans' piece sizes, as init sets them (sched/plan_sim.h's simOpFor does the same): ring
// pieces of 512 KiB where every peer is on another host, else 128 KiB; recursive doubling's
// messages at most half a channel (2 MiB / 1 MiB channels).
double ringPieceBytes(const TopoShape& shape) { return shape.ranksPerHost == 1 ? 512 << 10 : 128 << 10; }
double treePieceBytes(const TopoShape& shape) { return shape.ranksPerHost == 1 ? 1 << 20 : 512 << 10; }
double piecesOf(double bytes, double piece) { return std::max(1.0, std::ceil(bytes / piece)); }

// How many hops' time a round takes in which `msgs` of the N ranks' messages go at once: spread
// evenly over the kernels, each kernel runs msgs x kernelRanks / N of them (sending and
// receiving) on its cores, one hop's worth per core at a time. On the 8 pods x 1 rank (one
// kernel, 2 cores) of the header, recursive doubling's rounds (8 messages) took ~65 us against
// ~25 us for a ring step with 2 messages and ~70 us with 8; the binomial tree's levels (4, 2,
// 1 messages) ~30 us on average.
double crowding(double msgs, int nranks, const TopoShape& shape) {
  if (shape.kernelRanks <= 0 || shape.kernelCores <= 0) return 1;
  return std::max(1.0, msgs * shape.kernelRanks / nranks / shape.kernelCores);
}

// A pipelined phase: `rounds` piece rounds of `steps` steps each, over hops of `hopUs`. A
// lane runs its steps in order and a round's pieces go around before the next round starts,
// so where a piece crosses a hop faster than the hop's latency the rounds do not overlap and
// the phase is latency-bound: a chain of rounds x steps steps, one hop between each two (what
// accl-sim's runs of the plans show on fast links). Otherwise the latency of one pass plus the
// bytes on the busiest link.
double pipelinedUs(double rounds, double steps, double hopUs, double onePassUs) {
  return std::max((rounds * steps - 1) * hopUs, onePassUs);
}

// All-gather and reduce-scatter: N-1 blocks of s pass each rank; HierRing moves (L-1) x H
// blocks inside the host, then (H-1) blocks per rank across hosts, L ranks' worth per host.
double predictGatherScatterUs(bool reduces, Algo algo, size_t bytes, int nranks, const TopoShape& shape,
                              const LinkCosts& links) {
  const double s = static_cast<double>(bytes), n = nranks;
  const double h = shape.hosts, l = shape.ranksPerHost > 0 ? shape.ranksPerHost : n / h;
  const double pods = std::max(1, shape.pods), hostsPerPod = h / pods;
  // All-gather's passes copy; reduce-scatter's reduce, reading the whole input (N blocks).
  LinkCost in = links.intra;
  in.gbytesPerSec = reduces ? reduceGbps(links, n * s) : copyGbps(links);
  // Every rank sends a block in each step: steps queue for the cores where ranks crowd them.
  const double cr = crowding(n, nranks, shape);
  in.latencyUs *= cr;
  const bool multiHost = shape.hosts > 1;
  const double hopUs = !multiHost ? in.latencyUs
                       : cr * (pods > 1 && links.podLatencyUs > 0 ? links.podLatencyUs : links.inter.latencyUs);
  const double nic = links.inter.gbytesPerSec;
  const double podUplink = hostsPerPod * shape.nicsPerHost * nic / std::max(1.0, shape.podOversub);
  auto us = [](double b, double gbps) { return b / (gbps * 1e3); };
  const double piece = ringPieceBytes(shape);
  // Around the ring the hops alternate: H of its N edges cross hosts, the rest stay inside.
  const double ringHopUs = multiHost ? (h * hopUs + (n - h) * in.latencyUs) / n : in.latencyUs;
  switch (algo) {
    case Algo::Ring: {
      // One ring edge into each host (and pod): (N-1) x s through one NIC; N steps a round.
      const double onLinks = (n - 1) * s;
      double t = us(onLinks, in.gbytesPerSec);
      if (multiHost) t = std::max({t, us(onLinks, nic), pods > 1 ? us(onLinks, podUplink) : 0.0});
      return pipelinedUs(piecesOf(s, piece), n, ringHopUs, (n - 1) * ringHopUs + t);
    }
    case Algo::HierRing: {
      if (shape.ranksPerHost <= 1 || shape.hosts < 2) return -1;
      // Inside the host each round carries a piece's worth split over the H blocks.
      const double intra = pipelinedUs(piecesOf(s * h, piece), l, in.latencyUs,
                                       (l - 1) * in.latencyUs + us((l - 1) * h * s, in.gbytesPerSec));
      const double across = (h - 1) * l * s;  // per host, over its L slice rings
      double t = std::max(us(across, std::min<double>(shape.nicsPerHost, l) * nic), us((h - 1) * s, in.gbytesPerSec));
      if (pods > 1) t = std::max(t, us(across, podUplink));
      return intra + pipelinedUs(piecesOf(s, piece), h, hopUs, (h - 1) * hopUs + t);
    }
    default: return -1;
  }
}

}  // namespace

double copyGbps(const LinkCosts& links) {
  return links.intraCachedGbps > 0 ? links.intraCachedGbps : links.intra.gbytesPerSec;
}

double reduceGbps(const LinkCosts& links, double touchedBytes) {
  return links.intraCachedGbps > 0 && touchedBytes <= links.cacheBytes ? links.intraCachedGbps
                                                                       : links.intra.gbytesPerSec;
}

double predictUs(OpKind kind, Algo algo, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links) {
  if (kind == OpKind::AllReduce) return predictAllReduceUs(algo, bytes, nranks, shape, links);
  if (kind == OpKind::AllGather || kind == OpKind::ReduceScatter)
    return predictGatherScatterUs(kind == OpKind::ReduceScatter, algo, bytes, nranks, shape, links);
  return -1;
}

double predictTreeUs(TreeShape tree, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links) {
  const double s = static_cast<double>(bytes), n = nranks;
  const double h = shape.hosts, l = shape.ranksPerHost > 0 ? shape.ranksPerHost : n / h;
  const double pods = std::max(1, shape.pods), hostsPerPod = h / pods;
  const bool multiHost = shape.hosts > 1;
  const double red = reduceGbps(links, s), copy = copyGbps(links);
  const double inLat = links.intra.latencyUs;
  const double podLat = pods > 1 && links.podLatencyUs > 0 ? links.podLatencyUs : links.inter.latencyUs;
  const double nic = links.inter.gbytesPerSec;
  const double podUplink = hostsPerPod * shape.nicsPerHost * nic / std::max(1.0, shape.podOversub);
  auto us = [](double b, double gbps) { return b / (gbps * 1e3); };
  // Levels (rounds) by the link they cross, ranks placed by host along the ring: the first
  // log2(L) inside the host, the last log2(pods) between pods, the rest between hosts of a pod.
  const double levels = std::ceil(std::log2(n));
  const double inside = multiHost ? std::min(levels, std::floor(std::log2(l))) : levels;
  const double podLevels = pods > 1 ? std::ceil(std::log2(pods)) : 0;
  const double more = piecesOf(s, treePieceBytes(shape)) - 1;  // pieces above half a channel, one after another
  if (tree == TreeShape::Doubling) {
    // log2(N) whole-buffer exchanges (two more when N is not a power of two), every rank
    // sending in each: all L ranks of a host through its NICs, and between pods through the
    // uplink; with too few cores for all of them, the round queues for the CPU (crowding).
    const double rounds = levels + ((nranks & (nranks - 1)) ? 2 : 0);
    const double insideRounds = multiHost ? inside : rounds;
    const double hostRounds = std::max(0.0, rounds - insideRounds - podLevels);
    const double cr = crowding(n, nranks, shape);
    const double nicRound = us(l * s, std::min<double>(shape.nicsPerHost, l) * nic);
    double t = insideRounds * (inLat * cr + us(s, red));
    t += hostRounds * (links.inter.latencyUs * cr + nicRound);
    t += podLevels * (podLat * cr + std::max(nicRound, us(hostsPerPod * l * s, podUplink)));
    return t + more * cr * (insideRounds * inLat + hostRounds * links.inter.latencyUs + podLevels * podLat);
  }
  if (tree == TreeShape::Flat) {
    // Every rank sends to the root at once, which receives and reduces them one after another,
    // then sends the result to each: a hop each way (crowded: N-1 messages at once), or the
    // root's N-1 messages in turn where they take longer. The root's NIC carries the inputs
    // of the N-L ranks on other hosts in, and the result out to them.
    if (links.messageUs <= 0) return -1;
    const double hop = !multiHost ? inLat : pods > 1 ? podLat : links.inter.latencyUs;
    const double phase = std::max(hop * crowding(n - 1, nranks, shape), hop + (n - 1) * links.messageUs);
    const double remote = multiHost ? n - l : 0;
    return (1 + more) * 2 * phase + 2 * us(remote * s, nic) + (n - 1) * us(s, red) + us(s, copy);
  }
  // Binomial: level j (mask 2^j) has the ranks at odd multiples of 2^j send to the rank 2^j
  // before them, which reduces; the broadcast runs the levels back, copying. One message per
  // host (and pod) at a time across hosts.
  double t = 0, lat = 0;
  for (int j = 0; j < static_cast<int>(levels); j++) {
    const double mask = std::ldexp(1.0, j);
    const double msgs = n > mask ? std::floor((n - mask - 1) / (2 * mask)) + 1 : 0;
    const double hop = j < inside ? inLat : j >= levels - podLevels ? podLat : links.inter.latencyUs;
    const double cr = crowding(msgs, nranks, shape);
    t += 2 * hop * cr + (j < inside ? us(s, red) + us(s, copy) : 2 * us(s, nic));
    lat += 2 * hop * cr;
  }
  return t + more * lat;
}

TreeShape cheaperTreeShape(size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links,
                           double* predictedUs) {
  TreeShape best = TreeShape::Doubling;
  double bestUs = predictTreeUs(best, bytes, nranks, shape, links);
  for (TreeShape t : {TreeShape::Binomial, TreeShape::Flat}) {
    const double us = predictTreeUs(t, bytes, nranks, shape, links);
    if (us >= 0 && us < bestUs) {
      best = t;
      bestUs = us;
    }
  }
  if (predictedUs) *predictedUs = bestUs;
  return best;
}

double predictAllReduceUs(Algo algo, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links) {
  const double s = static_cast<double>(bytes), n = nranks;
  const double h = shape.hosts, l = shape.ranksPerHost > 0 ? shape.ranksPerHost : n / h;
  const double pods = std::max(1, shape.pods), hostsPerPod = h / pods;
  // Reduce-scatter halves reduce, all-gather halves copy: a pass of b bytes of each costs
  // b / red + b / copy, where one of a single rate costs 2b / rate.
  LinkCost in = links.intra;
  const double red = reduceGbps(links, s), copy = copyGbps(links);
  in.gbytesPerSec = 2 / (1 / red + 1 / copy);
  // The rings' steps: every rank sends a slice in each (fewer below N elements, counted here
  // as 4-byte ones), queueing for the cores where ranks crowd them (crowding()).
  const double cr = crowding(std::min(n, std::max(1.0, s / 4)), nranks, shape);
  in.latencyUs *= cr;
  const bool multiHost = shape.hosts > 1;
  // A step that crosses hosts waits for the slowest level it crosses.
  const double hopUs = !multiHost ? in.latencyUs
                       : cr * (pods > 1 && links.podLatencyUs > 0 ? links.podLatencyUs : links.inter.latencyUs);
  const double nic = links.inter.gbytesPerSec;
  // What a pod's uplink carries at most: its hosts' NICs divided by the oversubscription.
  const double podUplink = hostsPerPod * shape.nicsPerHost * nic / std::max(1.0, shape.podOversub);
  auto us = [](double b, double gbps) { return b / (gbps * 1e3); };  // bytes at GB/s -> us
  const double piece = ringPieceBytes(shape);
  // Around the ring the hops alternate: H of its N edges cross hosts, the rest stay inside, and
  // a piece's path through the 2(N-1) steps waits on each in turn.
  const double ringHopUs = multiHost ? (h * hopUs + (n - h) * in.latencyUs) / n : in.latencyUs;
  switch (algo) {
    case Algo::Ring: {
      // Ordered by host (and pod): each host's link carries one ring edge, 2(N-1)/N x S,
      // through one NIC (one ring); each rank copies as much through shared memory. A pod's
      // uplink carries one edge too. Rounds of 2N-1 steps, one piece of each slice a round.
      const double onLinks = 2 * (n - 1) / n * s;
      double t = us(onLinks, in.gbytesPerSec);
      if (multiHost) t = std::max({t, us(onLinks, nic), pods > 1 ? us(onLinks, podUplink) : 0.0});
      return pipelinedUs(piecesOf(s / n, piece), 2 * n - 1, ringHopUs, 2 * (n - 1) * ringHopUs + t);
    }
    case Algo::HierRing: {
      if (shape.ranksPerHost <= 0 || shape.hosts < 2) return -1;
      // The host's reduce-scatter and all-gather: rounds of L steps, a piece of each of L slices.
      const double intraPass = 2 * (l - 1) * in.latencyUs + us(2 * (l - 1) / l * s, in.gbytesPerSec);
      const double intra = pipelinedUs(piecesOf(s / l, piece), 2 * l, in.latencyUs, intraPass);
      // The L slices' rings share each host's NICs (up to L of them) and each pod's uplink:
      // 2(H-1)/H x S on each in all.
      const double across = 2 * (h - 1) / h * s;
      double t = us(across, std::min<double>(shape.nicsPerHost, l) * nic);
      if (pods > 1) t = std::max(t, us(across, podUplink));
      return intra + pipelinedUs(piecesOf(s / l / h, piece), 2 * h - 1, hopUs, 2 * (h - 1) * hopUs + t);
    }
    case Algo::Tree: {
      double us;
      cheaperTreeShape(bytes, nranks, shape, links, &us);
      return us;
    }
    default: return -1;
  }
}

Algo cheapestAllReduce(uint8_t allowed, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links,
                       std::string* why) {
  return cheapestAlgo(OpKind::AllReduce, allowed, bytes, nranks, shape, links, why);
}

Algo cheapestAlgo(OpKind kind, uint8_t allowed, size_t bytes, int nranks, const TopoShape& shape,
                  const LinkCosts& links, std::string* why) {
  const Algo candidates[] = {Algo::Tree, Algo::Ring, Algo::HierRing};
  const uint8_t bits[] = {kAlgoTree, kAlgoRing, kAlgoHierRing};
  Algo best = Algo::Ring;
  double bestUs = -1;
  std::string all;
  for (int i = 0; i < 3; i++) {
    if (!(allowed & bits[i])) continue;
    const double t = predictUs(kind, candidates[i], bytes, nranks, shape, links);
    if (t < 0) continue;
    char buf[96];
    const bool shaped = kind == OpKind::AllReduce && candidates[i] == Algo::Tree;
    snprintf(buf, sizeof(buf), "%s%s%s%s %.0f us", all.empty() ? "" : ", ", algoName(candidates[i]),
             shaped ? "/" : "", shaped ? treeShapeName(cheaperTreeShape(bytes, nranks, shape, links)) : "", t);
    all += buf;
    if (bestUs < 0 || t < bestUs) {
      bestUs = t;
      best = candidates[i];
    }
  }
  // The ring is what ran before the model and what it was measured against: another algorithm
  // must predict a clear win (5%), not a tie the model cannot tell apart (two ranks: one
  // exchange of S or a ring of two steps of S/2, the same bytes).
  if (best != Algo::Ring && (allowed & kAlgoRing)) {
    const double ring = predictUs(kind, Algo::Ring, bytes, nranks, shape, links);
    if (ring >= 0 && bestUs > 0.95 * ring) best = Algo::Ring;
  }
  if (why) {
    *why = "cost model, " + std::to_string(shape.hosts) + " hosts x " +
           (shape.ranksPerHost > 0 ? std::to_string(shape.ranksPerHost) : std::string("uneven")) + " ranks";
    if (shape.kernelRanks > shape.kernelCores && shape.kernelCores > 0)
      *why += ", " + std::to_string(shape.kernelRanks) + " ranks on one kernel's " + std::to_string(shape.kernelCores) +
              " cores";
    *why += ": " + all;
  }
  return best;
}

}  // namespace accl
