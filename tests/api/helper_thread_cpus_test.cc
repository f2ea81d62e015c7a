// The library's own threads land on the CPUs chosen for the rank (topo/thread_placement.h),
// checked on real threads of this process. The topology is tests/unit/data/two_numa_gpu_nic.xml
// (NUMA node 0 = CPUs 0-1) through NCCL_TOPO_FILE, the test thread is pinned to CPU 0 and
// NCCL_IGNORE_CPU_AFFINITY=1, so the rank's node is node 0 and its helper threads must run on
// CPUs 0-1 even though every thread they were created from is pinned to CPU 0 alone.
#include <gtest/gtest.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "accl.h"
#include "nccl.h"

namespace {

// Cpus_allowed_list of every thread of this process but the calling one.
std::vector<std::string> otherThreadsCpus() {
  std::vector<std::string> out;
  const std::string self = std::to_string(gettid());
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string tid = e->d_name;
    if (tid == "." || tid == ".." || tid == self) continue;
    std::ifstream status("/proc/self/task/" + tid + "/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("Cpus_allowed_list:", 0) == 0) out.push_back(line.substr(line.find_first_not_of(" \t", 18)));
  }
  closedir(d);
  return out;
}

int countEqual(const std::vector<std::string>& v, const std::string& s) {
  int n = 0;
  for (const auto& x : v) n += x == s;
  return n;
}

}  // namespace

TEST(HelperThreadCpus, SocketHostStreamAndStatusThreadsRunOnTheRanksNumaNode) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs to tell CPU 0 from CPUs 0-1";
  cpu_set_t cpu0;
  CPU_ZERO(&cpu0);
  CPU_SET(0, &cpu0);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(cpu0), &cpu0), 0);
  setenv("NCCL_TOPO_FILE", (std::string(ACCL_TEST_DATA_DIR) + "/two_numa_gpu_nic.xml").c_str(), 1);
  setenv("NCCL_IGNORE_CPU_AFFINITY", "1", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);  // sockets: one helper thread per peer connection
  setenv("NCCL_NET_PLUGIN", "none", 1);
  // The stream's own thread runs the work (not the caller, as on an idle stream), so it is placed.
  setenv("ACCL_STREAM_INLINE_USEC", "-1", 1);

  ASSERT_EQ(countEqual(otherThreadsCpus(), "0-1"), 0);  // nothing of ours runs yet
  cudaStream_t stream;
  ASSERT_EQ(ncclHostStreamCreate(&stream), ncclSuccess);
  ncclComm_t comms[2];
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  std::vector<float> a(4096, 1.0f), b(4096, 2.0f);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, comms[0], stream), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, ncclSum, comms[1], stream), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(ncclHostStreamSynchronize(stream), ncclSuccess);
  EXPECT_EQ(a[4095], 3.0f);
  EXPECT_EQ(b[0], 3.0f);

  // 2 socket helper threads (one per rank and peer), the status server, the stream's worker.
  std::vector<std::string> cpus = otherThreadsCpus();
  std::string all;
  for (const auto& c : cpus) all += c + " ";
  EXPECT_GE(countEqual(cpus, "0-1"), 4) << "threads' CPUs: " << all;
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  EXPECT_EQ(ncclHostStreamDestroy(stream), ncclSuccess);
}
