// rank_runner.h: run one test body on N ranks, as threads of this process or as processes.
//
// Processes re-execute this test binary for the current test only (--gtest_filter), with the
// child's role in the environment, so every rank is a clean process that reads NCCL_* variables
// at its first use. A test body therefore branches on childRole():
//
//   TEST(Suite, Name) {
//     if (const ChildRole* role = childRole()) { ...work of this child...; return; }
//     ChildResult r = runChildProcesses(4, /*ranksAreProcesses=*/true, {"NCCL_SHM_DISABLE=1"}, 300);
//     EXPECT_TRUE(r.ok) << r.report;
//   }
//
// A child reports failures through gtest (non-zero exit) and stderr; the parent kills children
// that outlive the timeout, so nothing hangs.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "nccl.h"

namespace accl_test {

struct ChildRole {
  int rank;    // this process's rank, or -1 when the child runs all ranks as threads
  int nranks;
};
// The role the parent gave this process, or nullptr in a normally started test.
const ChildRole* childRole();

struct ChildResult {
  bool ok = false;
  std::string report;  // per child: exit status and the tail of its output, when not ok
};
// Starts `nprocs` children running the current test. With ranksAreProcesses, child r is rank r
// of an `nprocs`-rank communicator (rendezvous through NCCL_COMM_ID on a free loopback port);
// otherwise nprocs must be 1 and `threadRanks` ranks run as threads in that child.
// extraEnv entries are "NAME=value" and override the inherited environment.
ChildResult runChildProcesses(int nprocs, bool ranksAreProcesses, int threadRanks,
                              const std::vector<std::string>& extraEnv, int timeoutSeconds);

// In a child that is one rank: its communicator (through NCCL_COMM_ID).
ncclResult_t initChildRankComm(const ChildRole& role, ncclComm_t* comm);

// Runs body(comm, rank) on `nranks` threads sharing one fresh communicator, then destroys it.
// Returns false with a message in *error if the communicator could not be made.
bool runThreadRanks(int nranks, const std::function<void(ncclComm_t comm, int rank)>& body, std::string* error);
// The same, with beforeInit(rank) run on each rank's thread before its ncclCommInitRank (to make
// the rank's CUDA device current: NCCL binds a communicator to the device current at init).
bool runThreadRanks(int nranks, const std::function<void(int rank)>& beforeInit,
                    const std::function<void(ncclComm_t comm, int rank)>& body, std::string* error);

// Aborts the process with a description of where each rank stands when no rank has made
// progress for `stallSeconds`: a hang fails the test instead of stalling the suite.
class Watchdog {
 public:
  Watchdog(int nranks, int stallSeconds);
  ~Watchdog();
  void at(int rank, std::string what);  // rank starts `what`; counts as progress
 private:
  void loop();
  int stallSeconds_;
  std::mutex mu_;
  std::vector<std::string> where_;
  std::chrono::steady_clock::time_point last_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace accl_test
