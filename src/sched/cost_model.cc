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

double predictAllReduceUs(Algo algo, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links) {
  const double s = static_cast<double>(bytes), n = nranks;
  const double h = shape.hosts, l = shape.ranksPerHost > 0 ? shape.ranksPerHost : n / h;
  const double pods = std::max(1, shape.pods), hostsPerPod = h / pods;
  LinkCost in = links.intra;
  if (links.intraCachedGbps > 0 && s <= links.cacheBytes) in.gbytesPerSec = links.intraCachedGbps;
  const bool multiHost = shape.hosts > 1;
  // A step that crosses hosts waits for the slowest level it crosses.
  const double hopUs = !multiHost ? in.latencyUs
                       : pods > 1 && links.podLatencyUs > 0 ? links.podLatencyUs
                                                            : links.inter.latencyUs;
  const double nic = links.inter.gbytesPerSec;
  // What a pod's uplink carries at most: its hosts' NICs divided by the oversubscription.
  const double podUplink = hostsPerPod * shape.nicsPerHost * nic / std::max(1.0, shape.podOversub);
  auto us = [](double b, double gbps) { return b / (gbps * 1e3); };  // bytes at GB/s -> us
  switch (algo) {
    case Algo::Ring: {
      // Ordered by host (and pod): every step waits for the slowest hop; each host's link
      // carries one ring edge, 2(N-1)/N x S, through one NIC (one ring); each rank copies as
      // much through shared memory. A pod's uplink carries one edge too.
      const double onLinks = 2 * (n - 1) / n * s;
      double t = us(onLinks, in.gbytesPerSec);
      if (multiHost) t = std::max({t, us(onLinks, nic), pods > 1 ? us(onLinks, podUplink) : 0.0});
      return 2 * (n - 1) * hopUs + t;
    }
    case Algo::HierRing: {
      if (shape.ranksPerHost <= 0 || shape.hosts < 2) return -1;
      const double intra = 2 * (l - 1) * in.latencyUs + us(2 * (l - 1) / l * s, in.gbytesPerSec);
      // The L slices' rings share each host's NICs (up to L of them) and each pod's uplink:
      // 2(H-1)/H x S on each in all.
      const double across = 2 * (h - 1) / h * s;
      double t = us(across, std::min<double>(shape.nicsPerHost, l) * nic);
      if (pods > 1) t = std::max(t, us(across, podUplink));
      return intra + 2 * (h - 1) * hopUs + t;
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
      double t = inside * (in.latencyUs + us(s, in.gbytesPerSec));
      const double nicRound = us(l * s, std::min<double>(shape.nicsPerHost, l) * nic);
      t += hostRounds * (links.inter.latencyUs + nicRound);
      t += podRounds * (hopUs + std::max(nicRound, us(hostsPerPod * l * s, podUplink)));
      return t;
    }
    default: return -1;
  }
}

Algo cheapestAllReduce(uint8_t allowed, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links,
                       std::string* why) {
  const Algo candidates[] = {Algo::Tree, Algo::Ring, Algo::HierRing};
  const uint8_t bits[] = {kAlgoTree, kAlgoRing, kAlgoHierRing};
  Algo best = Algo::Ring;
  double bestUs = -1;
  std::string all;
  for (int i = 0; i < 3; i++) {
    if (!(allowed & bits[i])) continue;
    const double t = predictAllReduceUs(candidates[i], bytes, nranks, shape, links);
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
    const double ring = predictAllReduceUs(Algo::Ring, bytes, nranks, shape, links);
    if (ring >= 0 && bestUs > 0.95 * ring) best = Algo::Ring;
  }
  if (why)
    *why = "cost model, " + std::to_string(shape.hosts) + " hosts x " +
           (shape.ranksPerHost > 0 ? std::to_string(shape.ranksPerHost) : std::string("uneven")) + " ranks: " + all;
  return best;
}

}  // namespace accl
