// cost_model.cc: alpha-beta costs of the all-reduce algorithms across hosts.
//
// Figures measured on the netns pods of tests/netns (veth pairs through a bridge, hpn0 shaped
// with tbf, 2 vCPUs shared by all ranks), best of 3 runs:
//   inter latency: 2 pods x 1 rank, NCCL_ALGO=Ring all_reduce_perf -b 8 -e 8 -n 200 -w 20:
//     one all-reduce of 2 ranks is 2 ring steps -> latency = time / 2;
//   inter bandwidth: HPN_RATE=2gbit perf/pods_topo_bench.sh (4 pods x 2 ranks, 64-128 MiB):
//     the ordered ring moves 2(N-1)/N x S over each pod link in the measured time;
//   intra latency and bandwidth: one host, 2 ranks, NCCL_ALGO=Ring NCCL_SHM_DISABLE=0
//     all_reduce_perf -b 8 -e 64M -c 0 (8 B: 2 steps; 64 MiB: 2(N-1)/N x S per rank).
// The tuner only compares algorithms with these, so what matters is the ratio of the link
// classes; a machine with real NICs has lower latencies and higher bandwidths throughout.
#include "sched/cost_model.h"
#include <cmath>

namespace accl {

const LinkCosts& measuredLinks() {
  static const LinkCosts links{{8.0, 2.0}, {60.0, 0.24}};
  return links;
}

double predictAllReduceUs(Algo algo, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links) {
  const double s = static_cast<double>(bytes), n = nranks;
  const double h = shape.hosts, l = shape.ranksPerHost > 0 ? shape.ranksPerHost : n / h;
  const LinkCost& in = links.intra;
  const LinkCost& out = shape.hosts > 1 ? links.inter : links.intra;
  auto us = [](double b, double gbps) { return b / (gbps * 1e3); };  // bytes at GB/s -> us
  switch (algo) {
    case Algo::Ring: {
      // Ordered by host: every step waits for the slowest hop; each host's link carries one
      // ring edge, 2(N-1)/N x S; each rank copies as much through shared memory.
      const double bytesOnLinks = 2 * (n - 1) / n * s;
      return 2 * (n - 1) * out.latencyUs + std::max(us(bytesOnLinks, out.gbytesPerSec), us(bytesOnLinks, in.gbytesPerSec));
    }
    case Algo::HierRing: {
      if (shape.ranksPerHost <= 0 || shape.hosts < 2) return -1;
      const double intra = 2 * (l - 1) * in.latencyUs + us(2 * (l - 1) / l * s, in.gbytesPerSec);
      // The L slices' rings share each host's link: 2(H-1)/H x S on it in all.
      const double inter = 2 * (h - 1) * out.latencyUs + us(2 * (h - 1) / h * s, out.gbytesPerSec);
      return intra + inter;
    }
    case Algo::Tree: {
      // Recursive doubling: log2(N) rounds (two more when N is not a power of two), each a
      // whole-buffer exchange; with ranks of one host exchanging across hosts at once, the
      // host's link carries L buffers a round.
      const double rounds = std::ceil(std::log2(n)) + ((nranks & (nranks - 1)) ? 2 : 0);
      return rounds * (out.latencyUs + us(l * s, out.gbytesPerSec));
    }
    default: return -1;
  }
}

}  // namespace accl
