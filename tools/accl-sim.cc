// accl-sim: predicted all-reduce time and bus bandwidth, per size and algorithm, for a job of
// N ranks (up to 65,536) on a described cluster, without moving data. It lays the ranks out
// with the library's own code (topo::layoutRanks: the ring order and its host crossings for
// the placement given), asks the library's tuner which algorithm it would run (chooseAlgo,
// as NCCL_ALGO allows) and prices each algorithm with the tuner's cost model
// (sched/cost_model.h). Output: the perf harness's table (one per algorithm, plus the tuner's
// pick), and JSON with --json. docs/scale.md says what it leaves out.
//   accl-sim --hosts H --ranks-per-host L [--pods P] [--nics-per-host K] [--oversub X]
//            [--placement blocked|roundrobin] [--intra-lat US] [--intra-bw GBPS]
//            [--inter-lat US] [--inter-bw GBPS] [--pod-lat US] [-b MIN] [-e MAX] [-f FACTOR]
//            [--cache-bytes B --intra-cached-bw GBPS] [--algos Ring,Tree,HierRing] [--json FILE]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "coll/algo_policy.h"
#include "sched/cost_model.h"
#include "sched/tuner.h"
#include "topo/rank_layout.h"

namespace {

using accl::Algo;

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
               "[--inter-bw GBPS] [--pod-lat US] [-b MIN] [-e MAX] [-f FACTOR] [--cache-bytes B "
               "--intra-cached-bw GBPS] [--algos Ring,Tree,HierRing] [--json FILE]\n",
               why);
  std::exit(2);
}

struct Row {
  std::string algo;
  size_t bytes;
  double us;
  double algbw, busbw;
};

}  // namespace

int main(int argc, char** argv) {
  accl::TopoShape shape;
  shape.hosts = 0;
  int perHost = 0;
  std::string placement = "blocked", algos = "Ring,Tree,HierRing", json;
  accl::LinkCosts links = accl::measuredLinks();
  size_t minBytes = 1 << 20, maxBytes = size_t{1} << 30, factor = 4;
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
    else if (a == "-b") minBytes = parseSize(value());
    else if (a == "-e") maxBytes = parseSize(value());
    else if (a == "-f") factor = parseSize(value());
    else if (a == "--algos") algos = value();
    else if (a == "--json") json = value();
    else if (a == "-h" || a == "--help") usage("predicted all-reduce times");
    else usage(("unknown option " + a).c_str());
  }
  if (shape.hosts < 1 || perHost < 1) usage("--hosts and --ranks-per-host must be at least 1");
  const long long n = static_cast<long long>(shape.hosts) * perHost;
  if (n > 65536) usage("at most 65,536 ranks");
  if (shape.pods < 1 || shape.hosts % shape.pods != 0) usage("--pods must divide --hosts");
  if (placement != "blocked" && placement != "roundrobin") usage("--placement is blocked or roundrobin");
  if (factor < 2 || minBytes < 1 || minBytes > maxBytes) usage("sizes: 1 <= -b <= -e, -f >= 2");
  shape.ranksPerHost = perHost;
  const int nranks = static_cast<int>(n);

  // The library's layout for this placement: host and pod of every rank, and the ring.
  std::vector<uint64_t> hostKey(nranks), podKey(nranks);
  const int hostsPerPod = shape.hosts / shape.pods;
  for (int r = 0; r < nranks; r++) {
    const int host = placement == "roundrobin" ? r % shape.hosts : r / perHost;
    hostKey[r] = static_cast<uint64_t>(host);
    podKey[r] = static_cast<uint64_t>(host / hostsPerPod);
  }
  const accl::topo::RankLayout layout = accl::topo::layoutRanks(hostKey, podKey);
  accl::AlgoPolicy policy;
  if (accl::parseAlgoPolicy(algos, &policy) != ncclSuccess) usage("bad --algos (NCCL_ALGO names)");

  std::printf("# accl-sim: %d ranks = %d pod(s) x %d host(s) x %d rank(s), %d NIC(s)/host, pod oversubscription %.1f, "
              "%s placement\n",
              nranks, shape.pods, hostsPerPod, perHost, shape.nicsPerHost, shape.podOversub, placement.c_str());
  std::printf("# links: intra-host %.1f us %.2f GB/s (%.2f GB/s up to %.0f bytes); inter-host %.1f us %.2f GB/s per "
              "NIC; between pods %.1f us\n",
              links.intra.latencyUs, links.intra.gbytesPerSec, links.intraCachedGbps, links.cacheBytes,
              links.inter.latencyUs, links.inter.gbytesPerSec,
              links.podLatencyUs > 0 ? links.podLatencyUs : links.inter.latencyUs);
  std::printf("# ring: %d host crossing(s) over %d host(s) (the library's order: %s)\n", layout.hostCrossings(),
              layout.nhosts, layout.describe(16).c_str());

  const Algo all[] = {Algo::Ring, Algo::Tree, Algo::HierRing};
  const uint8_t bits[] = {accl::kAlgoRing, accl::kAlgoTree, accl::kAlgoHierRing};
  std::vector<Row> rows;
  auto print = [](const Row& r) {
    std::printf("%12zu  %12zu  %8s  %6s  %6i  %7.1f  %6.2f  %6.2f    N/A  %s\n", r.bytes, r.bytes / 4, "float", "sum",
                -1, r.us, r.algbw, r.busbw, r.algo.c_str());
  };
  auto header = [](const char* what) {
    std::printf("#\n# %s\n", what);
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %s\n", "size", "count", "type", "redop", "root",
                "time", "algbw", "busbw", "#wrong", "algorithm");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "", "(us)",
                "(GB/s)", "(GB/s)", "");
  };
  auto row = [&](Algo a, size_t bytes, const std::string& label) -> bool {
    const double us = accl::predictAllReduceUs(a, bytes, nranks, shape, links);
    if (us < 0) return false;
    const double algbw = static_cast<double>(bytes) / (us * 1e3);
    rows.push_back({label, bytes, us, algbw, algbw * 2.0 * (nranks - 1) / nranks});
    print(rows.back());
    return true;
  };
  for (int i = 0; i < 3; i++) {
    if (!(policy.allowed[4] & bits[i])) continue;
    header((std::string("all-reduce, NCCL_ALGO=") + accl::algoName(all[i])).c_str());
    for (size_t b = minBytes; b <= maxBytes; b *= factor)
      if (!row(all[i], b, accl::algoName(all[i]))) {
        std::printf("#   (%s needs the same number of ranks, more than one, on every host)\n", accl::algoName(all[i]));
        break;
      }
  }
  header("all-reduce, the tuner's choice");
  for (size_t b = minBytes; b <= maxBytes; b *= factor) {
    std::string why;
    // The tuner's rule across hosts (chooseAlgo's), priced with these links.
    const Algo a = accl::cheapestAllReduce(policy.allowed[4], b, nranks, shape, links, &why);
    row(a, b, std::string("auto:") + accl::algoName(a));
  }
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
      std::fprintf(f, "%s{\"collective\":\"all_reduce\",\"algorithm\":\"%s\",\"bytes\":%zu,\"time_us\":%.3f,"
                      "\"algbw\":%.4f,\"busbw\":%.4f}",
                   i ? "," : "", rows[i].algo.c_str(), rows[i].bytes, rows[i].us, rows[i].algbw, rows[i].busbw);
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
