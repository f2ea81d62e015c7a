// accl-run: starts N local copies of a command as one job without MPI. Each child gets
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NCCL_COMM_ID (a free 127.0.0.1 port, unless
// already set) and ACCL_PERF_OOB_ADDR (another free port, for the perf harness' results).
// Children share our stdout/stderr. If one fails the others are stopped; the exit code is the
// worst child's (a signal counts as 128 + signal).
// Like mpirun, each rank is bound to one CPU of those we may use when the ranks fit them
// (--bind-to core, the default then) and left unbound when they do not (--bind-to none, the
// default when oversubscribed). Unbound, two ranks on 2 vCPUs were now and then put on one
// CPU by the scheduler and took 10x longer per small operation (0.18 -> 2.3 us at 8 bytes).
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "common/free_port.h"

namespace {

volatile sig_atomic_t forwardedSignal = 0;

void onSignal(int sig) { forwardedSignal = sig; }

// An unused loopback port (below the ephemeral range, so no outgoing connection takes it
// before the child binds it: tests/common/free_port.h).
int freePort() { return accl_test::freeLoopbackPort(); }

int usage() {
  std::fprintf(stderr, "usage: accl-run -np N [--bind-to core|none] [--] command [args...]\n");
  return 2;
}

// The CPUs this process may run on, in order.
std::vector<int> allowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// In the child: binds it to `cpu`; a refusal is reported and the rank runs unbound.
void bindToCpu(int rank, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    std::fprintf(stderr, "accl-run: rank %d: cannot bind to CPU %d (%s); running unbound\n", rank, cpu,
                 std::strerror(errno));
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void stopAll(const std::vector<pid_t>& children, const std::vector<bool>& running) {
  for (size_t i = 0; i < children.size(); ++i)
    if (running[i]) ::kill(children[i], SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    bool any = false;
    for (size_t i = 0; i < children.size(); ++i)
      if (running[i] && ::waitpid(children[i], nullptr, WNOHANG) == 0) any = true;
    if (!any) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (size_t i = 0; i < children.size(); ++i)
    if (running[i]) ::kill(children[i], SIGKILL);
}

}  // namespace

int main(int argc, char** argv) {
  int np = 0;
  int arg = 1;
  std::string bindTo;  // "core", "none", or "" (core when the ranks fit the CPUs)
  while (arg < argc && argv[arg][0] == '-') {
    const std::string a = argv[arg];
    if ((a == "-np" || a == "-n") && arg + 1 < argc) {
      np = std::atoi(argv[arg + 1]);
      arg += 2;
    } else if (a == "--bind-to" && arg + 1 < argc) {
      bindTo = argv[arg + 1];
      if (bindTo != "core" && bindTo != "none") return usage();
      arg += 2;
    } else if (a == "--") {
      ++arg;
      break;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      return usage();
    }
  }
  if (np < 1 || arg >= argc) return usage();

  const std::string commId =
      std::getenv("NCCL_COMM_ID") ? std::getenv("NCCL_COMM_ID") : "127.0.0.1:" + std::to_string(freePort());
  const std::string oobAddr = "127.0.0.1:" + std::to_string(freePort());
  const std::vector<int> cpus = allowedCpus();
  if (bindTo.empty()) bindTo = np <= static_cast<int>(cpus.size()) ? "core" : "none";
  if (bindTo == "core" && np > static_cast<int>(cpus.size())) {
    std::fprintf(stderr, "accl-run: --bind-to core needs a CPU per rank: %d ranks, %zu CPUs\n", np, cpus.size());
    return 2;
  }

  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<pid_t> children;
  std::vector<bool> running;
  for (int rank = 0; rank < np; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("accl-run: fork");
      stopAll(children, running);
      return 1;
    }
    if (pid == 0) {
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(np).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(np).c_str(), 1);
      setenv("NCCL_COMM_ID", commId.c_str(), 1);
      setenv("ACCL_PERF_OOB_ADDR", oobAddr.c_str(), 1);
      if (bindTo == "core") bindToCpu(rank, cpus[rank]);
      execvp(argv[arg], argv + arg);
      std::fprintf(stderr, "accl-run: cannot run %s: %s\n", argv[arg], std::strerror(errno));
      _exit(127);
    }
    children.push_back(pid);
    running.push_back(true);
  }

  int worst = 0;
  size_t alive = children.size();
  while (alive > 0) {
    if (forwardedSignal) {
      for (size_t i = 0; i < children.size(); ++i)
        if (running[i]) ::kill(children[i], forwardedSignal);
      forwardedSignal = 0;
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    const auto it = std::find(children.begin(), children.end(), pid);
    if (it == children.end()) continue;
    running[it - children.begin()] = false;
    --alive;
    const int code = exitCodeOf(status);
    worst = std::max(worst, code);
    if (code != 0 && alive > 0) {
      std::fprintf(stderr, "accl-run: rank %d exited with %d; stopping the others\n",
                   static_cast<int>(it - children.begin()), code);
      stopAll(children, running);
      break;
    }
  }
  return worst;
}
