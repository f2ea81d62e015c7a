// failure_scenario.h: kill one rank of a multi-process communicator in the middle of an
// all-reduce loop and record what every survivor sees: how long until its collective failed,
// what ncclCommGetAsyncError says, whether ncclCommShrink (excluding the dead rank) gives a
// communicator whose all-reduce is correct, and how long ncclCommAbort of the failed
// communicator takes. Public API only; shared by tests/mp/failure_shrink_test.cc and
// tools/accl-failure-timing.cc (header-only so both can build it without a CMake edit).
//
// Ranks are fork()ed children of the caller (no exec), so the caller must not have
// initialized a communicator or started threads that hold locks. Rendezvous goes through
// NCCL_COMM_ID on a free loopback port. Times are CLOCK_MONOTONIC, which all processes share.
#pragma once
#include <arpa/inet.h>
#include <cstdint>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "../common/free_port.h"
#include "nccl.h"

namespace accl_failure {

struct Scenario {
  int nranks = 4;
  int victim = 1;
  bool sockets = false;       // NCCL_SHM_DISABLE=1
  int itersBeforeKill = 5;    // every rank completes this many all-reduces before the kill
  size_t count = 1 << 15;     // floats per all-reduce
  bool shrink = true;         // survivors shrink and all-reduce on the survivors
  int noErrorLimitSec = 30;   // a survivor that sees no error for this long reports it
  int timeoutSec = 120;       // the whole scenario; children still alive then are killed
  std::vector<std::string> extraEnv;  // NAME=value, set in every child
};

// One survivor's account, written whole to a pipe (smaller than PIPE_BUF, so atomic).
struct RankReport {
  int rank = -1;
  int failedResult = 0;     // what the failing collective returned
  int asyncError = 0;       // ncclCommGetAsyncError after the failure
  int64_t failedAtNs = 0;   // CLOCK_MONOTONIC when the collective returned the error
  int shrinkResult = -1;    // ncclCommShrink's result (-1: not attempted)
  int shrinkNranks = 0;
  int shrinkAllReduce = -1;  // the all-reduce on the shrunk comm (-1: not attempted)
  int shrinkCorrect = 0;     // its result matched the survivors' sum
  double abortMs = -1;       // ncclCommAbort of the failed communicator
  char message[200] = {0};   // first problem, if any
};

struct Result {
  bool ok = false;           // every survivor reported; the victim died by our SIGKILL
  std::string report;        // what went wrong, when !ok
  int64_t killedAtNs = 0;
  std::vector<RankReport> ranks;  // survivors, by rank
  double detectMs(const RankReport& r) const { return (r.failedAtNs - killedAtNs) / 1e6; }
};

inline int64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}


// Fills buf with rank r's contribution for iteration it; small integers, so float sums are exact.
inline void fill(std::vector<float>& buf, int r, int it) {
  for (size_t i = 0; i < buf.size(); i++) buf[i] = static_cast<float>((r + 1) * ((i + it) % 7 + 1));
}
inline bool checkSum(const std::vector<float>& buf, const std::vector<int>& ranks, int it) {
  for (size_t i = 0; i < buf.size(); i++) {
    float want = 0;
    for (int r : ranks) want += static_cast<float>((r + 1) * ((i + it) % 7 + 1));
    if (buf[i] != want) return false;
  }
  return true;
}

inline void note(RankReport* rep, const char* fmt, const char* a, int b) {
  if (rep->message[0] == 0) snprintf(rep->message, sizeof(rep->message), fmt, a, b);
}

// A child's whole life. Never returns.
[[noreturn]] inline void childMain(const Scenario& s, int rank, int port, int readyFd, int reportFd) {
  char commId[64];
  snprintf(commId, sizeof(commId), "127.0.0.1:%d", port);
  setenv("NCCL_COMM_ID", commId, 1);
  if (s.sockets) setenv("NCCL_SHM_DISABLE", "1", 1);
  for (const std::string& kv : s.extraEnv) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos) setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
  }
  RankReport rep;
  rep.rank = rank;
  auto finish = [&]() {
    if (write(reportFd, &rep, sizeof(rep)) != static_cast<ssize_t>(sizeof(rep))) _exit(3);
    _exit(0);
  };
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r == ncclSuccess) r = ncclCommInitRank(&comm, s.nranks, id, rank);
  if (r != ncclSuccess) {
    note(&rep, "init failed: %s (%d)", ncclGetErrorString(r), r);
    finish();
  }
  std::vector<int> all(s.nranks);
  for (int i = 0; i < s.nranks; i++) all[i] = i;
  std::vector<float> buf(s.count);
  const int64_t start = monotonicNs();
  for (int it = 0;; it++) {
    fill(buf, rank, it);
    r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr);
    if (r != ncclSuccess) {
      rep.failedAtNs = monotonicNs();
      rep.failedResult = r;
      break;
    }
    if (!checkSum(buf, all, it)) {
      note(&rep, "all-reduce %s%d before the kill gave a wrong sum", "", it);
      finish();
    }
    if (it + 1 == s.itersBeforeKill) {
      char c = 'R';
      if (write(readyFd, &c, 1) != 1) _exit(3);
    }
    if (monotonicNs() - start > static_cast<int64_t>(s.noErrorLimitSec) * 1000000000) {
      note(&rep, "no collective failed within %s%d s of starting the loop", "", s.noErrorLimitSec);
      finish();
    }
  }
  ncclResult_t async = ncclSuccess;
  ncclResult_t q = ncclCommGetAsyncError(comm, &async);
  rep.asyncError = q == ncclSuccess ? async : q;
  if (s.shrink) {
    ncclComm_t shrunk = nullptr;
    int excl = s.victim;
    r = ncclCommShrink(comm, &excl, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT);
    rep.shrinkResult = r;
    if (r == ncclSuccess) {
      int newRank = -1;
      ncclCommCount(shrunk, &rep.shrinkNranks);
      ncclCommUserRank(shrunk, &newRank);
      std::vector<int> survivors;
      for (int i = 0; i < s.nranks; i++)
        if (i != s.victim) survivors.push_back(i);
      // Contributions keep the old rank's values, so the sum also checks the rank mapping.
      bool good = true;
      for (int it = 0; it < 3 && good; it++) {
        fill(buf, rank, 1000 + it);
        r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, shrunk, nullptr);
        rep.shrinkAllReduce = r;
        good = r == ncclSuccess && checkSum(buf, survivors, 1000 + it);
      }
      rep.shrinkCorrect = good;
      ncclResult_t d = ncclCommDestroy(shrunk);
      if (d != ncclSuccess) note(&rep, "destroying the shrunk comm: %s (%d)", ncclGetErrorString(d), d);
    }
  }
  int64_t t = monotonicNs();
  r = ncclCommAbort(comm);
  rep.abortMs = (monotonicNs() - t) / 1e6;
  if (r != ncclSuccess) note(&rep, "ncclCommAbort: %s (%d)", ncclGetErrorString(r), r);
  finish();
  _exit(0);  // not reached (finish exits)
}

inline std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

inline Result run(const Scenario& s) {
  Result res;
  int port = accl_test::freeLoopbackPort();
  int ready[2], reports[2];
  if (port < 0 || pipe(ready) != 0 || pipe(reports) != 0) {
    res.report = "setup failed (port/pipe)";
    return res;
  }
  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids(s.nranks, -1);
  for (int r = 0; r < s.nranks; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      close(ready[0]);
      close(reports[0]);
      childMain(s, r, port, ready[1], reports[1]);
    }
    pids[r] = pid;
  }
  close(ready[1]);
  close(reports[1]);
  const int64_t deadline = monotonicNs() + static_cast<int64_t>(s.timeoutSec) * 1000000000;
  auto msLeft = [&]() { return static_cast<int>(std::max<int64_t>(0, (deadline - monotonicNs()) / 1000000)); };

  // Wait until every rank has completed itersBeforeKill all-reduces, then kill the victim.
  int readyCount = 0;
  while (readyCount < s.nranks && msLeft() > 0) {
    pollfd p{ready[0], POLLIN, 0};
    if (poll(&p, 1, std::min(msLeft(), 1000)) <= 0) continue;
    char c;
    ssize_t n = read(ready[0], &c, 1);
    if (n <= 0) break;
    readyCount++;
  }
  bool killed = false;
  if (readyCount == s.nranks) {
    usleep(20 * 1000);  // well inside the loop, mid-collective with high probability
    res.killedAtNs = monotonicNs();
    killed = kill(pids[s.victim], SIGKILL) == 0;
  } else {
    res.report += "only " + std::to_string(readyCount) + " of " + std::to_string(s.nranks) +
                  " ranks completed the first all-reduces\n";
  }

  // Collect survivors' reports.
  size_t want = killed ? static_cast<size_t>(s.nranks - 1) : 0;
  while (res.ranks.size() < want && msLeft() > 0) {
    pollfd p{reports[0], POLLIN, 0};
    if (poll(&p, 1, std::min(msLeft(), 1000)) <= 0) continue;
    RankReport rep;
    ssize_t n = read(reports[0], &rep, sizeof(rep));
    if (n != static_cast<ssize_t>(sizeof(rep))) break;
    res.ranks.push_back(rep);
  }
  std::sort(res.ranks.begin(), res.ranks.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  if (res.ranks.size() < want) res.report += "only " + std::to_string(res.ranks.size()) + " survivors reported\n";

  // Reap everyone; kill what is still running at the deadline.
  bool allOk = killed && res.ranks.size() == want;
  for (int r = 0; r < s.nranks; r++) {
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(pids[r], &status, WNOHANG)) == 0 && msLeft() > 0) usleep(10 * 1000);
    if (got == 0) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], &status, 0);
      res.report += "rank " + std::to_string(r) + " still running at the scenario timeout (killed)\n";
      allOk = false;
      continue;
    }
    bool expected = r == s.victim ? (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
                                  : (WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!expected) {
      res.report += "rank " + std::to_string(r) + ": " + describeStatus(status) + "\n";
      allOk = false;
    }
  }
  close(ready[0]);
  close(reports[0]);
  res.ok = allOk;
  return res;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace accl_failure
