// forked_ranks.h: what the mp tests whose ranks are fork()ed children (no exec) share: a block
// of MAP_SHARED memory that the parent and the ranks it forks all see, the unique id handed
// from rank 0 to the others through it, and CLOCK_MONOTONIC time (one clock for every process).
// Header-only, like failure_scenario.h.
#pragma once
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <new>
#include <vector>
#include "nccl.h"

namespace accl_forked {

inline int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A value-initialised T (atomics and plain data only) in anonymous MAP_SHARED memory, so the
// parent and the ranks it forks afterwards see one copy; nullptr if mmap fails.
template <typename T>
T* mapShared() {
  void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) T{};
}

// The communicator's unique id, passed from rank 0 to the others (a member of the shared block).
struct SharedId {
  std::atomic<int> ready;
  ncclUniqueId id;
};

// In a forked rank: rank 0 makes the id and publishes it, the others wait for it.
// Exits the rank with 11 when there is no id.
inline void exchangeId(SharedId* shared, int rank) {
  if (rank == 0) {
    if (ncclGetUniqueId(&shared->id) != ncclSuccess) _exit(11);
    shared->ready.store(1);
  }
  while (shared->ready.load() == 0) usleep(1000);
}

// exchangeId, then the rank's communicator; exits the rank with 12 when init fails.
inline ncclComm_t initForkedRank(SharedId* shared, int nranks, int rank) {
  exchangeId(shared, rank);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, shared->id, rank) != ncclSuccess) _exit(12);
  return comm;
}

// Forks `nranks` children, child r running rankMain(r) (which ends the process; if it returns,
// the child exits 0), and appends their pids. Output is flushed first, so that no child prints
// the parent's buffered output again. Call it as ASSERT_NO_FATAL_FAILURE(forkRanks(...)).
inline void forkRanks(int nranks, const std::function<void(int rank)>& rankMain, std::vector<pid_t>* pids) {
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < nranks; r++) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      rankMain(r);
      _exit(0);
    }
    pids->push_back(pid);
  }
}

}  // namespace accl_forked
