// accl-sim: predicted time and bus bandwidth of the library's collectives, per size and
// algorithm, for a job of N ranks (up to 65,536) on a described cluster, without moving data.
// It lays the ranks out with the library's own code (topo::layoutRanks: the ring order and its
// host crossings for the placement given), builds every rank's plan with the planner's own
// function (sched/coll_plan.h: the steps the executor would run) and runs those plans against
// a link model (sched/plan_sim.h: per-host NICs, pod uplinks, intra-host bandwidth and
// latencies). Next to each prediction it prints the tuner's cost model (sched/cost_model.h)
// and, per size, the algorithm the tuner would pick. Output: the perf harness's table (one per
// collective and algorithm, plus the tuner's pick), and JSON with --json. docs/scale.md says
// what it leaves out.
//   accl-sim --hosts H --ranks-per-host L [--pods P] [--nics-per-host K] [--oversub X]
//            [--placement blocked|roundrobin] [--intra-lat US] [--intra-bw GBPS]
//            [--inter-lat US] [--inter-bw GBPS] [--pod-lat US] [--message-us US]
//            [--kernel-ranks K --kernel-cores C] [-b MIN] [-e MAX] [-f FACTOR]
//            [--cache-bytes B --intra-cached-bw GBPS] [--algos Ring,Tree,HierRing]
//            [--colls all_reduce,all_gather,reduce_scatter,broadcast,reduce] [--max-steps N] [--json FILE]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>
#include "coll/algo_policy.h"
#include "sched/coll_plan.h"
#include "sched/cost_model.h"
#include "sched/plan_sim.h"
#include "sched/tuner.h"
#include "topo/rank_layout.h"

namespace {

using accl::Algo;
using accl::OpKind;

size_t parseSize(const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  switch (end && *end ? *end : ' ') {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "accl-sim: %s\nusage: accl-sim --hosts H --ranks-per-host L [--pods P] [--nics-per-host K] "
               "[--oversub X] [--placement blocked|roundrobin] [--intra-lat US] [--intra-bw GBPS] [--inter-lat US] "
               "[--inter-bw GBPS] [--pod-lat US] [--message-us US] [--kernel-ranks K --kernel-cores C] [-b MIN] [-e MAX] [-f FACTOR] [--cache-bytes B "
               "--intra-cached-bw GBPS] [--algos Ring,Tree,HierRing] "
               "[--colls all_reduce,all_gather,reduce_scatter,broadcast,reduce] [--max-steps N] [--json FILE]\n",
               why);
  std::exit(2);
}

struct Coll {
  const char* name;
  OpKind kind;
  int policyIndex;  // AlgoPolicy::allowed[]: broadcast, reduce, all-gather, reduce-scatter, all-reduce
};
const Coll kColls[] = {{"all_reduce", OpKind::AllReduce, 4},
                       {"all_gather", OpKind::AllGather, 2},
                       {"reduce_scatter", OpKind::ReduceScatter, 3},
                       {"broadcast", OpKind::Broadcast, 0},
                       {"reduce", OpKind::Reduce, 1}};

// nccl-tests' bus bandwidth factor.
double busFactor(OpKind k, int n) {
  if (k == OpKind::AllReduce) return 2.0 * (n - 1) / n;
  if (k == OpKind::AllGather || k == OpKind::ReduceScatter) return static_cast<double>(n - 1) / n;
  return 1.0;
}

// Which algorithms are distinct plans for a collective (all-gather and reduce-scatter run the
// ring for Tree; HierRing exists for all-reduce, all-gather and reduce-scatter).
bool hasPlan(OpKind k, Algo a) {
  if (a == Algo::Tree) return k == OpKind::AllReduce || k == OpKind::Broadcast || k == OpKind::Reduce;
  if (a == Algo::HierRing) return k == OpKind::AllReduce || k == OpKind::AllGather || k == OpKind::ReduceScatter;
  return true;
}

struct Row {
  std::string coll, algo;
  size_t bytes;
  double us, modelUs, algbw, busbw;
  uint64_t steps, linkBytes;
  bool simulated;
};

}  // namespace

int main(int argc, char** argv) {
  accl::TopoShape shape;
  shape.hosts = 0;
  int perHost = 0;
  std::string placement = "blocked", algos = "Ring,Tree,HierRing", colls = "all_reduce", json;
  accl::LinkCosts links = accl::measuredLinks();
  size_t minBytes = 1 << 20, maxBytes = size_t{1} << 30, factor = 4;
  uint64_t maxSteps = 20000000;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--hosts") shape.hosts = std::atoi(value());
    else if (a == "--ranks-per-host") perHost = std::atoi(value());
    else if (a == "--pods") shape.pods = std::atoi(value());
    else if (a == "--nics-per-host") shape.nicsPerHost = std::atoi(value());
    else if (a == "--oversub") shape.podOversub = std::atof(value());
    else if (a == "--placement") placement = value();
    else if (a == "--intra-lat") links.intra.latencyUs = std::atof(value());
    else if (a == "--intra-bw") {
      links.intra.gbytesPerSec = std::atof(value());
      links.intraCachedGbps = 0;  // the measured cache effect belongs to the measured figures
    } else if (a == "--cache-bytes") links.cacheBytes = static_cast<double>(parseSize(value()));
    else if (a == "--intra-cached-bw") links.intraCachedGbps = std::atof(value());
    else if (a == "--inter-lat") links.inter.latencyUs = std::atof(value());
    else if (a == "--inter-bw") links.inter.gbytesPerSec = std::atof(value());
    else if (a == "--pod-lat") links.podLatencyUs = std::atof(value());
    else if (a == "--message-us") links.messageUs = std::atof(value());
    // Ranks sharing one OS kernel and its cores (netns pods of one machine: all of them): the
    // model and the tuner's pick charge crowded rounds; the plans' run does not.
    else if (a == "--kernel-ranks") shape.kernelRanks = std::atoi(value());
    else if (a == "--kernel-cores") shape.kernelCores = std::atoi(value());
    else if (a == "-b") minBytes = parseSize(value());
    else if (a == "-e") maxBytes = parseSize(value());
    else if (a == "-f") factor = parseSize(value());
    else if (a == "--algos") algos = value();
    else if (a == "--colls") colls = value();
    else if (a == "--max-steps") maxSteps = std::strtoull(value(), nullptr, 10);
    else if (a == "--json") json = value();
    else if (a == "-h" || a == "--help") usage("predicted collective times");
    else usage(("unknown option " + a).c_str());
  }
  if (shape.hosts < 1 || perHost < 1) usage("--hosts and --ranks-per-host must be at least 1");
  const long long n = static_cast<long long>(shape.hosts) * perHost;
  if (n > 65536) usage("at most 65,536 ranks");
  if (shape.pods < 1 || shape.hosts % shape.pods != 0) usage("--pods must divide --hosts");
  if (shape.nicsPerHost < 1) usage("--nics-per-host must be at least 1");
  if (placement != "blocked" && placement != "roundrobin") usage("--placement is blocked or roundrobin");
  if (factor < 2 || minBytes < 4 || minBytes > maxBytes) usage("sizes: 4 <= -b <= -e, -f >= 2");
  if (links.intra.gbytesPerSec <= 0 || links.inter.gbytesPerSec <= 0) usage("bandwidths must be positive");
  shape.ranksPerHost = perHost;
  const int nranks = static_cast<int>(n);
  std::vector<const Coll*> chosen;
  {
    std::stringstream ss(colls);
    std::string name;
    while (std::getline(ss, name, ',')) {
      const Coll* found = nullptr;
      for (const Coll& c : kColls)
        if (name == c.name) found = &c;
      if (!found) usage(("unknown collective " + name).c_str());
      chosen.push_back(found);
    }
  }

  // The library's layout for this placement: host and pod of every rank, and the ring.
  std::vector<uint64_t> hostKey(nranks), podKey(nranks);
  const int hostsPerPod = shape.hosts / shape.pods;
  for (int r = 0; r < nranks; r++) {
    const int host = placement == "roundrobin" ? r % shape.hosts : r / perHost;
    hostKey[r] = static_cast<uint64_t>(host);
    podKey[r] = static_cast<uint64_t>(host / hostsPerPod);
  }
  accl::SimCluster cluster;
  cluster.layout = accl::topo::layoutRanks(hostKey, podKey);
  cluster.nicsPerHost = shape.nicsPerHost;
  cluster.podOversub = shape.podOversub;
  cluster.links = links;
  const accl::topo::RankLayout& layout = cluster.layout;
  accl::AlgoPolicy policy;
  if (accl::parseAlgoPolicy(algos, &policy) != ncclSuccess) usage("bad --algos (NCCL_ALGO names)");

  std::printf("# accl-sim: %d ranks = %d pod(s) x %d host(s) x %d rank(s), %d NIC(s)/host, pod oversubscription %.1f, "
              "%s placement\n",
              nranks, shape.pods, hostsPerPod, perHost, shape.nicsPerHost, shape.podOversub, placement.c_str());
  std::printf("# links: intra-host %.1f us %.2f GB/s (%.2f GB/s up to %.0f bytes); inter-host %.1f us %.2f GB/s per "
              "NIC; between pods %.1f us; %.1f us a message\n",
              links.intra.latencyUs, links.intra.gbytesPerSec, links.intraCachedGbps, links.cacheBytes,
              links.inter.latencyUs, links.inter.gbytesPerSec,
              links.podLatencyUs > 0 ? links.podLatencyUs : links.inter.latencyUs, links.messageUs);
  if (shape.kernelRanks > 0 && shape.kernelCores > 0)
    std::printf("# cores: up to %d ranks share one kernel's %d cores (the model charges crowded rounds; the plans' run "
                "has no CPU cost)\n",
                shape.kernelRanks, shape.kernelCores);
  std::printf("# ring: %d host crossing(s) over %d host(s) (the library's order: %s)\n", layout.hostCrossings(),
              layout.nhosts, layout.describe(16).c_str());
  std::printf("# time: every rank's plan run against the link model (sched/plan_sim.h); model: the tuner's cost "
              "model; link: bytes through the busiest host's NICs (sent)\n");

  const Algo all[] = {Algo::Ring, Algo::Tree, Algo::HierRing};
  const uint8_t bits[] = {accl::kAlgoRing, accl::kAlgoTree, accl::kAlgoHierRing};
  std::vector<Row> rows;
  auto print = [](const Row& r) {
    std::printf("%12zu  %12zu  %8s  %6s  %6i  %9.1f  %6.2f  %6.2f    N/A  %9.1f  %10.3g  %s%s\n", r.bytes, r.bytes / 4,
                "float", "sum", -1, r.us, r.algbw, r.busbw, r.modelUs, static_cast<double>(r.linkBytes),
                r.simulated ? "" : "(model) ", r.algo.c_str());
  };
  auto header = [](const std::string& what) {
    std::printf("#\n# %s\n", what.c_str());
    std::printf("# %10s  %12s  %8s  %6s  %6s  %9s  %6s  %6s  %6s  %9s  %10s  %s\n", "size", "count", "type", "redop",
                "root", "time", "algbw", "busbw", "#wrong", "model", "link", "algorithm");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %9s  %6s  %6s  %6s  %9s  %10s\n", "(B)", "(elements)", "", "", "", "(us)",
                "(GB/s)", "(GB/s)", "", "(us)", "(B)");
  };
  int failures = 0;
  // Runs the plans of `algo` for `coll` at `bytes`; falls back to the cost model (marked) when
  // the plans have more steps than --max-steps.
  // `size` as the perf harness counts it: all-gather's output, reduce-scatter's input (the
  // ranks' blocks together), the buffer otherwise; the op and the model take bytes per rank.
  auto perRank = [&](const Coll& coll, size_t size) {
    const bool blocks = coll.kind == OpKind::AllGather || coll.kind == OpKind::ReduceScatter;
    return blocks ? std::max<size_t>(4, size / nranks / 4 * 4) : size;
  };
  // The all-reduce Tree's shape, as the tuner picks it (the model's cheaper one).
  auto treeShapeOf = [&](size_t bytes) { return accl::cheaperTreeShape(bytes, nranks, shape, links); };
  // "Tree/flat": the all-reduce Tree names its shape.
  auto algoLabel = [&](OpKind kind, Algo algo, size_t bytes) {
    std::string label = accl::algoName(algo);
    if (kind == OpKind::AllReduce && algo == Algo::Tree) label += std::string("/") + accl::treeShapeName(treeShapeOf(bytes));
    return label;
  };
  auto row = [&](const Coll& coll, Algo algo, size_t size, const std::string& label) -> Row {
    const size_t bytes = perRank(coll, size);
    Row r{coll.name, label, size, -1, accl::predictUs(coll.kind, algo, bytes, nranks, shape, links), 0, 0, 0, 0, true};
    const accl::SimResult res = accl::simulatePlans(cluster, accl::simOpFor(coll.kind, algo, bytes, layout, treeShapeOf(bytes)), maxSteps);
    if (res.ok) {
      r.us = res.us;
      r.steps = res.steps;
      for (uint64_t b : res.hostSent) r.linkBytes = std::max(r.linkBytes, b);
    } else if (res.error.rfind("more than", 0) == 0 && r.modelUs >= 0) {
      r.us = r.modelUs;
      r.simulated = false;
    } else {
      std::printf("# %s %s %zu bytes: the plans did not run: %s\n", coll.name, label.c_str(), bytes, res.error.c_str());
      failures++;
      return r;
    }
    r.algbw = static_cast<double>(size) / (r.us * 1e3);
    r.busbw = r.algbw * busFactor(coll.kind, nranks);
    rows.push_back(r);
    print(r);
    return r;
  };
  // The tuner's rule (chooseAlgo's), with the cost model priced at these links across hosts.
  auto tunerPick = [&](const Coll& coll, size_t bytes) {
    const uint8_t allowed =
        policy.allowed[coll.policyIndex] & (accl::kAlgoRing | accl::kAlgoTree | accl::kAlgoHierRing);
    const bool blocks = coll.kind == OpKind::AllGather || coll.kind == OpKind::ReduceScatter;
    const bool both = (allowed & accl::kAlgoRing) && (allowed & accl::kAlgoHierRing);
    Algo a;
    if (shape.hosts > 1 && coll.kind == OpKind::AllReduce)
      a = accl::cheapestAlgo(coll.kind, allowed, bytes, nranks, shape, links);
    else if (shape.hosts > 1 && blocks && perHost > 1 && both)
      a = accl::cheapestAlgo(coll.kind, accl::kAlgoRing | accl::kAlgoHierRing, bytes, nranks, shape, links);
    else
      a = accl::chooseAlgo(policy, coll.kind, bytes, nranks, 0, false, &shape);
    return hasPlan(coll.kind, a) ? a : Algo::Ring;
  };
  bool modelOnly = false;
  for (const Coll* coll : chosen) {
    for (int i = 0; i < 3; i++) {
      if (!(policy.allowed[coll->policyIndex] & bits[i]) || !hasPlan(coll->kind, all[i])) continue;
      if (all[i] == Algo::HierRing && !accl::hierRingRuns(coll->kind, layout)) {
        std::printf("#\n# %s, NCCL_ALGO=HierRing: needs the same number of ranks, more than one, on several hosts\n",
                    coll->name);
        continue;
      }
      header(std::string(coll->name) + ", NCCL_ALGO=" + accl::algoName(all[i]));
      for (size_t b = minBytes; b <= maxBytes; b *= factor)
        modelOnly |= !row(*coll, all[i], b, algoLabel(coll->kind, all[i], perRank(*coll, b))).simulated;
    }
    header(std::string(coll->name) + ", the tuner's choice (and where the plans run here find another faster)");
    for (size_t b = minBytes; b <= maxBytes; b *= factor) {
      const size_t bytes = perRank(*coll, b);
      const Algo a = tunerPick(*coll, bytes);
      const Row picked = row(*coll, a, b, "auto:" + algoLabel(coll->kind, a, bytes));
      // The fastest plan among those the tuner could have picked.
      std::string faster;
      for (int i = 0; i < 3; i++) {
        if (all[i] == a || !(policy.allowed[coll->policyIndex] & bits[i]) || !hasPlan(coll->kind, all[i])) continue;
        if (all[i] == Algo::HierRing && !accl::hierRingRuns(coll->kind, layout)) continue;
        const accl::SimResult res =
            accl::simulatePlans(cluster, accl::simOpFor(coll->kind, all[i], bytes, layout, treeShapeOf(bytes)), maxSteps);
        if (res.ok && picked.simulated && res.us < 0.95 * picked.us)
          faster += std::string(faster.empty() ? "" : ", ") + accl::algoName(all[i]) + " " +
                    std::to_string(static_cast<long long>(res.us)) + " us";
      }
      if (!faster.empty()) std::printf("#   %zu bytes: the plans run faster with %s\n", b, faster.c_str());
    }
  }
  if (modelOnly)
    std::printf("# (model): the plans of every rank have more than %llu steps in all (--max-steps); the cost model's "
                "figure is shown instead\n",
                static_cast<unsigned long long>(maxSteps));
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "accl-sim: cannot write %s\n", json.c_str());
      return 1;
    }
    std::fprintf(f, "{\"nranks\":%d,\"hosts\":%d,\"ranks_per_host\":%d,\"pods\":%d,\"nics_per_host\":%d,"
                    "\"pod_oversub\":%g,\"placement\":\"%s\",\"ring_host_crossings\":%d,\"records\":[",
                 nranks, shape.hosts, perHost, shape.pods, shape.nicsPerHost, shape.podOversub, placement.c_str(),
                 layout.hostCrossings());
    for (size_t i = 0; i < rows.size(); i++)
      std::fprintf(f, "%s{\"collective\":\"%s\",\"algorithm\":\"%s\",\"bytes\":%zu,\"time_us\":%.3f,"
                      "\"model_us\":%.3f,\"simulated\":%s,\"steps\":%llu,\"busiest_host_link_bytes\":%llu,"
                      "\"algbw\":%.4f,\"busbw\":%.4f}",
                   i ? "," : "", rows[i].coll.c_str(), rows[i].algo.c_str(), rows[i].bytes, rows[i].us,
                   rows[i].modelUs, rows[i].simulated ? "true" : "false",
                   static_cast<unsigned long long>(rows[i].steps),
                   static_cast<unsigned long long>(rows[i].linkBytes), rows[i].algbw, rows[i].busbw);
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return failures ? 1 : 0;
}
