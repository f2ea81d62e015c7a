// thread_ranks_util.h: run N ranks as threads of this process, one communicator each, for
// tests of the public API (tests/api). Failures inside a rank are reported with gtest
// EXPECT_* (thread-safe); ASSERT_* in a rank function only ends that rank.
#pragma once
#include <functional>
#include <string>
#include "nccl.h"

namespace accltest {

// Creates `nranks` comms (ncclCommInitRank, one per thread, shared unique id), runs
// fn(rank, comm) on each thread, then destroys every comm that fn left non-null.
void runRanks(int nranks, const std::function<void(int rank, ncclComm_t& comm)>& fn);

// Runs fn(rank) on `n` threads and joins them (no communicator).
void runThreads(int n, const std::function<void(int rank)>& fn);

// ncclGetLastError(NULL) as a std::string (empty if NULL).
std::string lastError();

}  // namespace accltest
