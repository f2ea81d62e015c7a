// accl-failure-timing: how long survivors take to notice a killed rank, and how long
// ncclCommAbort of the failed communicator takes (median over several runs).
//
//   accl-failure-timing [--ranks N] [--victim R] [--runs K] [--transport shm|socket|both] [--no-shrink]
//
// Each run forks N rank processes (public API only, rendezvous on loopback through
// NCCL_COMM_ID), lets them all-reduce, SIGKILLs the victim mid-loop and collects from every
// survivor the time from the kill until its collective returned an error, and the time its
// ncclCommAbort took (after ncclCommShrink + an all-reduce on the survivors, unless --no-shrink).
// Scenario code: tests/mp/failure_scenario.h.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "tests/mp/failure_scenario.h"

namespace {

int usage() {
  fprintf(stderr,
          "usage: accl-failure-timing [--ranks N] [--victim R] [--runs K] [--transport shm|socket|both] "
          "[--no-shrink]\n");
  return 2;
}

int measure(accl_failure::Scenario s, int runs, const char* label) {
  std::vector<double> firstDetect, lastDetect, allDetect, aborts;
  int failures = 0;
  for (int i = 0; i < runs; i++) {
    accl_failure::Result res = accl_failure::run(s);
    bool good = res.ok;
    double first = 1e18, last = 0;
    for (const auto& r : res.ranks) {
      if (r.message[0] || r.failedResult == ncclSuccess || (s.shrink && !r.shrinkCorrect)) good = false;
      if (r.message[0]) fprintf(stderr, "  run %d rank %d: %s\n", i, r.rank, r.message);
      double d = res.detectMs(r);
      first = std::min(first, d);
      last = std::max(last, d);
      allDetect.push_back(d);
      aborts.push_back(r.abortMs);
    }
    if (!good) {
      failures++;
      fprintf(stderr, "  run %d failed:\n%s", i, res.report.c_str());
      continue;
    }
    firstDetect.push_back(first);
    lastDetect.push_back(last);
    printf("  %s run %d: first survivor %.0f ms, last survivor %.0f ms after the kill\n", label, i, first, last);
  }
  printf("%s, %d ranks, victim %d, %d runs (%d failed):\n", label, s.nranks, s.victim, runs, failures);
  printf("  detection, median of the first survivor per run: %8.1f ms\n", accl_failure::median(firstDetect));
  printf("  detection, median of the last survivor per run:  %8.1f ms\n", accl_failure::median(lastDetect));
  printf("  detection, median over all survivors:            %8.1f ms\n", accl_failure::median(allDetect));
  printf("  ncclCommAbort of the failed comm, median:        %8.1f ms\n", accl_failure::median(aborts));
  fflush(stdout);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  accl_failure::Scenario s;
  int runs = 5;
  std::string transport = "both";
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--ranks") {
      const char* v = value();
      if (!v) return usage();
      s.nranks = atoi(v);
    } else if (a == "--victim") {
      const char* v = value();
      if (!v) return usage();
      s.victim = atoi(v);
    } else if (a == "--runs") {
      const char* v = value();
      if (!v) return usage();
      runs = atoi(v);
    } else if (a == "--transport") {
      const char* v = value();
      if (!v) return usage();
      transport = v;
    } else if (a == "--no-shrink") {
      s.shrink = false;
    } else {
      return usage();
    }
  }
  if (s.nranks < 2 || s.victim < 0 || s.victim >= s.nranks || runs < 1) return usage();
  if (transport != "shm" && transport != "socket" && transport != "both") return usage();
  int rc = 0;
  if (transport != "socket") {
    s.sockets = false;
    rc |= measure(s, runs, "shared memory");
  }
  if (transport != "shm") {
    s.sockets = true;
    rc |= measure(s, runs, "sockets (NCCL_SHM_DISABLE=1)");
  }
  return rc;
}
