// Communicators made inside a job started with NCCL_COMM_ID (the way accl-run starts one):
// ncclCommSplit and ncclCommShrink must each get a rendezvous of their own, so ranks of
// different colours never meet in one communicator. NCCL_COMM_ID names only the first
// communicator's root. Four forked processes split into two colours several times in a row
// (new roots appear and vanish while others are starting) and check every sub-communicator's
// size, their rank in it and an all-reduce over its members; then they shrink.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <algorithm>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "../common/free_port.h"
#include "nccl.h"

namespace {

constexpr int kRanks = 4;
constexpr int kRounds = 6;

// Each parent rank contributes rank+1; the expected sum is over the members of its colour.
std::string checkAllReduce(ncclComm_t comm, const std::vector<int>& members, int parentRank) {
  std::vector<float> buf(1000, static_cast<float>(parentRank + 1));
  ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr);
  if (r != ncclSuccess) return std::string("all-reduce: ") + ncclGetErrorString(r);
  float want = 0;
  for (int m : members) want += static_cast<float>(m + 1);
  for (float v : buf)
    if (v != want) return "all-reduce gave " + std::to_string(v) + ", want " + std::to_string(want);
  return "";
}

// Runs in a child process; returns "" on success or what went wrong.
std::string runRank(int rank) {
  ncclUniqueId id;
  ncclComm_t world = nullptr;
  if (ncclGetUniqueId(&id) != ncclSuccess) return "ncclGetUniqueId failed";
  if (ncclCommInitRank(&world, kRanks, id, rank) != ncclSuccess) return "init failed";
  for (int round = 0; round < kRounds; round++) {
    // Alternate the colouring so each round's communicators differ from the last ones.
    int colour = round % 2 == 0 ? rank % 2 : rank / 2;
    std::vector<int> members;
    for (int r = 0; r < kRanks; r++)
      if ((round % 2 == 0 ? r % 2 : r / 2) == colour) members.push_back(r);
    ncclComm_t sub = nullptr;
    ncclResult_t res = ncclCommSplit(world, colour, rank, &sub, nullptr);
    if (res != ncclSuccess) return "round " + std::to_string(round) + ": split: " + ncclGetErrorString(res);
    int n = 0, me = -1;
    ncclCommCount(sub, &n);
    ncclCommUserRank(sub, &me);
    int wantMe = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
    if (n != static_cast<int>(members.size()) || me != wantMe) {
      return "round " + std::to_string(round) + ": colour " + std::to_string(colour) + " has " + std::to_string(n) +
             " ranks (want " + std::to_string(members.size()) + "), rank " + std::to_string(me) + " (want " +
             std::to_string(wantMe) + ")";
    }
    std::string bad = checkAllReduce(sub, members, rank);
    if (!bad.empty()) return "round " + std::to_string(round) + ": " + bad;
    if (ncclCommDestroy(sub) != ncclSuccess) return "destroy of split failed";
  }
  int exclude = kRanks - 1;
  if (rank != exclude) {
    ncclComm_t shrunk = nullptr;
    ncclResult_t res = ncclCommShrink(world, &exclude, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT);
    if (res != ncclSuccess) return std::string("shrink: ") + ncclGetErrorString(res);
    std::string bad = checkAllReduce(shrunk, {0, 1, 2}, rank);
    if (!bad.empty()) return "after shrink: " + bad;
    ncclCommDestroy(shrunk);
  }
  // The excluded rank must not leave before the others finished with the world communicator.
  ncclCommDestroy(world);
  return "";
}

TEST(SplitUnderCommId, EveryColourGetsItsOwnRendezvous) {
  int port = accl_test::freeLoopbackPort();
  ASSERT_GT(port, 0);
  std::string commId = "127.0.0.1:" + std::to_string(port);
  std::vector<pid_t> pids;
  int pipes[kRanks][2];
  for (int rank = 0; rank < kRanks; rank++) {
    ASSERT_EQ(pipe(pipes[rank]), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("NCCL_COMM_ID", commId.c_str(), 1);
      alarm(90);  // a hang fails the test instead of blocking ctest
      std::string err = runRank(rank);
      if (!err.empty()) (void)!write(pipes[rank][1], err.data(), err.size());
      _exit(err.empty() ? 0 : 1);
    }
    close(pipes[rank][1]);
    pids.push_back(pid);
  }
  for (int rank = 0; rank < kRanks; rank++) {
    int status = 0;
    waitpid(pids[rank], &status, 0);
    char buf[512] = {0};
    (void)!read(pipes[rank][0], buf, sizeof(buf) - 1);
    close(pipes[rank][0]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << rank << ": " << (buf[0] ? buf : WIFSIGNALED(status) ? "killed by a signal" : "failed");
  }
}

}  // namespace
