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
// The tuner compares algorithms with these; a machine with real NICs and cores has other
// figures (accl-sim takes them as options).
#include "sched/cost_model.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include "coll/algo_policy.h"

namespace accl {

const LinkCosts& measuredLinks() {
  static const LinkCosts links{{3.0, 0.3}, {50.0, 0.24}, 0, 4 << 20, 4.0};
  return links;
}

namespace {

// The plans' piece sizes, as init sets them (sched/plan_sim.h's simOpFor does the same): ring
// pieces of 512 KiB where every peer is on another host, else 128 KiB; recursive doubling's
// messages at most half a channel (2 MiB / 1 MiB channels).
double ringPieceBytes(const TopoShape& shape) { return shape.ranksPerHost == 1 ? 512 << 10 : 128 << 10; }
double treePieceBytes(const TopoShape& shape) { return shape.ranksPerHost == 1 ? 1 << 20 : 512 << 10; }
double piecesOf(double bytes, double piece) { return std::max(1.0, std::ceil(bytes / piece)); }

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
  const bool multiHost = shape.hosts > 1;
  const double hopUs = !multiHost ? in.latencyUs
                       : pods > 1 && links.podLatencyUs > 0 ? links.podLatencyUs
                                                            : links.inter.latencyUs;
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

double predictAllReduceUs(Algo algo, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links) {
  const double s = static_cast<double>(bytes), n = nranks;
  const double h = shape.hosts, l = shape.ranksPerHost > 0 ? shape.ranksPerHost : n / h;
  const double pods = std::max(1, shape.pods), hostsPerPod = h / pods;
  // Reduce-scatter halves reduce, all-gather halves copy: a pass of b bytes of each costs
  // b / red + b / copy, where one of a single rate costs 2b / rate.
  LinkCost in = links.intra;
  const double red = reduceGbps(links, s), copy = copyGbps(links);
  in.gbytesPerSec = 2 / (1 / red + 1 / copy);
  const bool multiHost = shape.hosts > 1;
  // A step that crosses hosts waits for the slowest level it crosses.
  const double hopUs = !multiHost ? in.latencyUs
                       : pods > 1 && links.podLatencyUs > 0 ? links.podLatencyUs
                                                            : links.inter.latencyUs;
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
      // Recursive doubling: log2(N) rounds (two more when N is not a power of two), each a
      // whole-buffer exchange. Ranks placed by host: log2(L) rounds inside the host, the
      // rest across; there all L ranks of a host send at once through its NICs (and, in the
      // rounds between pods, through the pod's uplink).
      const double rounds = std::ceil(std::log2(n)) + ((nranks & (nranks - 1)) ? 2 : 0);
      const double inside = multiHost ? std::min(rounds, std::floor(std::log2(l))) : rounds;
      const double podRounds = pods > 1 ? std::ceil(std::log2(pods)) : 0;
      const double hostRounds = std::max(0.0, rounds - inside - podRounds);
      double t = inside * (in.latencyUs + us(s, red));
      const double nicRound = us(l * s, std::min<double>(shape.nicsPerHost, l) * nic);
      t += hostRounds * (links.inter.latencyUs + nicRound);
      t += podRounds * (hopUs + std::max(nicRound, us(hostsPerPod * l * s, podUplink)));
      // Buffers above half a channel run as several recursive doublings, one after another.
      const double more = piecesOf(s, treePieceBytes(shape)) - 1;
      t += more * (inside * in.latencyUs + hostRounds * links.inter.latencyUs + podRounds * hopUs);
      return t;
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
    char buf[64];
    snprintf(buf, sizeof(buf), "%s%s %.0f us", all.empty() ? "" : ", ", algoName(candidates[i]), t);
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
  if (why)
    *why = "cost model, " + std::to_string(shape.hosts) + " hosts x " +
           (shape.ranksPerHost > 0 ? std::to_string(shape.ranksPerHost) : std::string("uneven")) + " ranks: " + all;
  return best;
}

}  // namespace accl
