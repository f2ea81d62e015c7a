#include "api/thread_ranks_util.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace accltest {

void runThreads(int n, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

void runRanks(int nranks, const std::function<void(int rank, ncclComm_t& comm)>& fn) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  runThreads(nranks, [&](int rank) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess) << lastError();
    fn(rank, comm);
    if (comm != nullptr) {
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << lastError();
    }
  });
}

std::string lastError() {
  const char* s = ncclGetLastError(nullptr);
  return s ? s : "";
}

}  // namespace accltest
