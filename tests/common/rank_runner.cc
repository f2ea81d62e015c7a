// rank_runner.cc: see rank_runner.h.
#include "common/free_port.h"
#include "common/rank_runner.h"

#include <algorithm>
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

extern char** environ;

namespace accl_test {
namespace {

constexpr const char* kRankEnv = "ACCL_TEST_CHILD_RANK";
constexpr const char* kNranksEnv = "ACCL_TEST_CHILD_NRANKS";


std::string tailOf(const std::string& path, size_t maxBytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > maxBytes ? "..." + s.substr(s.size() - maxBytes) : s;
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

}  // namespace

const ChildRole* childRole() {
  static ChildRole role;
  static const ChildRole* result = [] () -> const ChildRole* {
    const char* r = std::getenv(kRankEnv);
    const char* n = std::getenv(kNranksEnv);
    if (r == nullptr || n == nullptr) return nullptr;
    role.rank = std::atoi(r);
    role.nranks = std::atoi(n);
    return &role;
  }();
  return result;
}

ChildResult runChildProcesses(int nprocs, bool ranksAreProcesses, int threadRanks,
                              const std::vector<std::string>& extraEnv, int timeoutSeconds) {
  ChildResult result;
  const testing::TestInfo* test = testing::UnitTest::GetInstance()->current_test_info();
  const std::string testName = std::string(test->test_suite_name()) + "." + test->name();
  const std::string filter = "--gtest_filter=" + testName;
  int port = ranksAreProcesses ? freeLoopbackPort() : 0;
  if (ranksAreProcesses && port <= 0) {
    result.report = "no free loopback port";
    return result;
  }

  struct Child {
    pid_t pid = -1;
    std::string log;
    bool done = false;
    int status = 0;
  };
  std::vector<Child> children(nprocs);
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) {
    result.report = "cannot read /proc/self/exe";
    return result;
  }
  exe[len] = 0;
  for (int i = 0; i < nprocs; i++) {
    std::vector<std::string> env;
    std::vector<std::string> overrides = extraEnv;
    overrides.push_back(std::string(kRankEnv) + "=" + std::to_string(ranksAreProcesses ? i : -1));
    overrides.push_back(std::string(kNranksEnv) + "=" + std::to_string(ranksAreProcesses ? nprocs : threadRanks));
    if (ranksAreProcesses) overrides.push_back("NCCL_COMM_ID=127.0.0.1:" + std::to_string(port));
    for (char** e = environ; *e; e++) {
      std::string kv(*e);
      std::string key = kv.substr(0, kv.find('='));
      bool overridden = key == "NCCL_COMM_ID" || key == "GTEST_OUTPUT" || key == "XML_OUTPUT_FILE";
      for (const std::string& o : overrides) overridden |= o.substr(0, o.find('=')) == key;
      if (!overridden) env.push_back(kv);
    }
    env.insert(env.end(), overrides.begin(), overrides.end());
    std::vector<char*> envp;
    for (std::string& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);

    char logPath[] = "/tmp/accl-test-child-XXXXXX";
    int fd = mkstemp(logPath);
    if (fd < 0) {
      result.report = "mkstemp failed";
      return result;
    }
    children[i].log = logPath;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fd, 1);
    posix_spawn_file_actions_adddup2(&actions, fd, 2);
    posix_spawn_file_actions_addclose(&actions, fd);
    std::string filterArg = filter;
    char* argv[] = {exe, filterArg.data(), nullptr};
    if (posix_spawn(&children[i].pid, exe, &actions, nullptr, argv, envp.data()) != 0) children[i].pid = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fd);
  }

  // Wait; once any child fails, the others get a short grace period before they are killed.
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + std::chrono::seconds(timeoutSeconds);
  bool timedOut = false;
  for (;;) {
    bool all = true;
    for (Child& c : children) {
      if (c.done || c.pid < 0) {
        c.done = true;
        continue;
      }
      pid_t r = waitpid(c.pid, &c.status, WNOHANG);
      if (r == c.pid) {
        c.done = true;
        if (!(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) {
          deadline = std::min(deadline, clock::now() + std::chrono::seconds(20));
        }
      } else {
        all = false;
      }
    }
    if (all) break;
    if (clock::now() > deadline) {
      timedOut = true;
      for (Child& c : children) {
        if (!c.done) kill(c.pid, SIGKILL);
      }
      for (Child& c : children) {
        if (!c.done) {
          waitpid(c.pid, &c.status, 0);
          c.done = true;
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  result.ok = !timedOut;
  std::ostringstream report;
  if (timedOut) report << "children killed after the timeout (" << timeoutSeconds << " s or a failed sibling)\n";
  for (int i = 0; i < nprocs; i++) {
    Child& c = children[i];
    bool good = c.pid > 0 && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0;
    // A filter that matched nothing would also exit 0: demand the test's own OK line.
    if (good && tailOf(c.log, 1 << 20).find("[       OK ] " + testName) == std::string::npos) {
      good = false;
      report << "---- child " << i << " exited 0 without running " << testName << "\n";
    }
    if (!good) {
      result.ok = false;
      report << "---- child " << i << ": " << (c.pid > 0 ? describeStatus(c.status) : "spawn failed") << "\n"
             << tailOf(c.log, 6000) << "\n";
    }
  }
  for (Child& c : children) unlink(c.log.c_str());
  result.report = report.str();
  return result;
}

ncclResult_t initChildRankComm(const ChildRole& role, ncclComm_t* comm) {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);  // encodes NCCL_COMM_ID; rank 0 starts the root at init
  if (r != ncclSuccess) return r;
  return ncclCommInitRank(comm, role.nranks, id, role.rank);
}

bool runThreadRanks(int nranks, const std::function<void(ncclComm_t, int)>& body, std::string* error) {
  return runThreadRanks(nranks, [](int) {}, body, error);
}

bool runThreadRanks(int nranks, const std::function<void(int)>& beforeInit,
                    const std::function<void(ncclComm_t, int)>& body, std::string* error) {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    *error = std::string("ncclGetUniqueId: ") + ncclGetErrorString(r);
    return false;
  }
  std::vector<ncclComm_t> comms(nranks, nullptr);
  std::vector<ncclResult_t> results(nranks, ncclSuccess);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; rank++) {
    threads.emplace_back([&, rank] {
      beforeInit(rank);
      results[rank] = ncclCommInitRank(&comms[rank], nranks, id, rank);
      if (results[rank] != ncclSuccess) return;
      body(comms[rank], rank);
      results[rank] = ncclCommDestroy(comms[rank]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < nranks; rank++) {
    if (results[rank] != ncclSuccess) {
      *error = "rank " + std::to_string(rank) + ": communicator init/destroy failed: " +
               ncclGetErrorString(results[rank]);
      return false;
    }
  }
  return true;
}

Watchdog::Watchdog(int nranks, int stallSeconds)
    : stallSeconds_(stallSeconds), where_(nranks), last_(std::chrono::steady_clock::now()) {
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  thread_.join();
}

void Watchdog::at(int rank, std::string what) {
  std::lock_guard<std::mutex> lk(mu_);
  where_[rank] = std::move(what);
  last_ = std::chrono::steady_clock::now();
}

void Watchdog::loop() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return;
    if (std::chrono::steady_clock::now() - last_ > std::chrono::seconds(stallSeconds_)) {
      std::fprintf(stderr, "WATCHDOG: no rank made progress for %d s; the library hangs. Ranks are at:\n",
                   stallSeconds_);
      for (size_t r = 0; r < where_.size(); r++) std::fprintf(stderr, "  rank %zu: %s\n", r, where_[r].c_str());
      std::fflush(stderr);
      std::_Exit(3);
    }
  }
}

}  // namespace accl_test
