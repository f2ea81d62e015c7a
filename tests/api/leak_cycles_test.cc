// 1,000 init/destroy cycles leak nothing: each cycle makes two thread ranks with
// ncclCommInitAll, runs a tiny all-reduce (grouped, NULL stream) and destroys both; before and
// after, we compare open file descriptors (/proc/self/fd), threads (/proc/self/task), this
// job's shared-memory segments (/dev/shm/accl-*), heap bytes in use (mallinfo2) and RSS.
// ACCL_LEAK_CYCLES overrides the count (the sanitizer quick runs use fewer cycles).
#include <dirent.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "accl.h"
#include "nccl.h"

namespace {

int countEntries(const char* dir, const char* prefix = "") {
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  }
  closedir(d);
  return n - (strcmp(dir, "/proc/self/fd") == 0 ? 1 : 0);  // opendir's own fd
}

long rssKiB() {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

struct Snapshot {
  int fds, threads, shm;
  size_t heap;
  long rss;
};

Snapshot snapshot() {
  return {countEntries("/proc/self/fd"), countEntries("/proc/self/task"), countEntries("/dev/shm", "accl-"),
          mallinfo2().uordblks, rssKiB()};
}

// One cycle; returns "" or what failed.
std::string cycle(int i) {
  ncclComm_t comms[2] = {nullptr, nullptr};
  ncclResult_t r = ncclCommInitAll(comms, 2, nullptr);
  if (r != ncclSuccess) return "ncclCommInitAll: " + std::string(ncclGetErrorString(r));
  float buf[2][8];
  for (int k = 0; k < 2; k++)
    for (int j = 0; j < 8; j++) buf[k][j] = static_cast<float>(k + j + i % 3);
  r = ncclGroupStart();
  for (int k = 0; k < 2 && r == ncclSuccess; k++) r = ncclAllReduce(buf[k], buf[k], 8, ncclFloat, ncclSum, comms[k], nullptr);
  ncclResult_t e = ncclGroupEnd();
  std::string err;
  if (r != ncclSuccess || e != ncclSuccess) err = "all-reduce: " + std::string(ncclGetErrorString(r != ncclSuccess ? r : e));
  for (int k = 0; k < 2 && err.empty(); k++)
    for (int j = 0; j < 8; j++)
      if (buf[k][j] != static_cast<float>(2 * (j + i % 3) + 1)) err = "all-reduce gave a wrong sum";
  for (ncclComm_t c : comms) {
    ncclResult_t d = ncclCommDestroy(c);
    if (d != ncclSuccess && err.empty()) err = "ncclCommDestroy: " + std::string(ncclGetErrorString(d));
  }
  return err;
}

}  // namespace

TEST(LeakCycles, InitAllReduceDestroyCyclesLeakNoFdsThreadsShmOrMemory) {
  const char* env = getenv("ACCL_LEAK_CYCLES");
  const int cycles = env ? atoi(env) : 1000;
  const int warmup = 10;  // first-use statics (parameter table, interface list, logs)
  for (int i = 0; i < warmup; i++) ASSERT_EQ(cycle(i), "") << "warm-up cycle " << i;
  usleep(100 * 1000);  // threads of the last destroy finish exiting
  const Snapshot before = snapshot();
  for (int i = 0; i < cycles; i++) ASSERT_EQ(cycle(i), "") << "cycle " << i;
  // A thread that has been joined may linger in /proc/self/task for a moment; allow it time.
  Snapshot after = snapshot();
  for (int t = 0; t < 50 && after.threads > before.threads; t++) {
    usleep(20 * 1000);
    after = snapshot();
  }
  printf("[ info     ] %d cycles: fds %d -> %d, threads %d -> %d, /dev/shm/accl-* %d -> %d, "
         "heap in use %zu -> %zu bytes, RSS %ld -> %ld KiB\n",
         cycles, before.fds, after.fds, before.threads, after.threads, before.shm, after.shm, before.heap, after.heap,
         before.rss, after.rss);
  EXPECT_EQ(after.fds, before.fds) << "file descriptors leaked";
  EXPECT_EQ(after.threads, before.threads) << "threads leaked";
  EXPECT_EQ(after.shm, before.shm) << "shared-memory segments left in /dev/shm";
  // Allocator caches may hold a little; a real leak of even 1 KiB per cycle exceeds this.
  EXPECT_LT(static_cast<long>(after.heap) - static_cast<long>(before.heap), 512L * 1024) << "heap grew";
#if defined(__SANITIZE_ADDRESS__)
  // ASan's quarantine keeps freed memory resident; LeakSanitizer checks the heap at exit instead.
  printf("[ info     ] RSS check skipped under AddressSanitizer (LeakSanitizer checks leaks at exit)\n");
#else
  EXPECT_LT(after.rss - before.rss, 32L * 1024) << "RSS grew by more than 32 MiB";
#endif
}

// Four thread ranks, each on its own host stream, all-reduce several sizes concurrently: the
// data race detector (make test-tsan and the quick TSan run of make test) watches the executor,
// doorbells and shm rings while ranks really run in parallel.
TEST(ThreadRanks, ConcurrentAllReducesOnHostStreamsAreCorrect) {
  constexpr int kRanks = 4;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; rank++) {
    threads.emplace_back([&, rank]() {
      std::string& err = errors[rank];
      ncclComm_t comm = nullptr;
      cudaStream_t stream = nullptr;
      ncclResult_t r = ncclCommInitRank(&comm, kRanks, id, rank);
      if (r == ncclSuccess) r = ncclHostStreamCreate(&stream);
      if (r != ncclSuccess) {
        err = "init: " + std::string(ncclGetErrorString(r));
        return;
      }
      for (size_t count : {size_t(1), size_t(1000), size_t(1) << 18}) {
        std::vector<float> buf(count);
        for (int it = 0; it < 3 && err.empty(); it++) {
          for (size_t j = 0; j < count; j++) buf[j] = static_cast<float>((rank + 1) * ((j + it) % 5));
          r = ncclAllReduce(buf.data(), buf.data(), count, ncclFloat, ncclSum, comm, stream);
          if (r == ncclSuccess) r = ncclHostStreamSynchronize(stream);
          if (r != ncclSuccess) err = "all-reduce: " + std::string(ncclGetErrorString(r));
          for (size_t j = 0; j < count && err.empty(); j++)
            if (buf[j] != static_cast<float>(10 * ((j + it) % 5))) err = "wrong sum at " + std::to_string(j);
        }
      }
      ncclHostStreamDestroy(stream);
      r = ncclCommDestroy(comm);
      if (r != ncclSuccess && err.empty()) err = "destroy: " + std::string(ncclGetErrorString(r));
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < kRanks; rank++) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}
