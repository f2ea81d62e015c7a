// Ring capacity and pipelining piece follow the transports (src/comm/init.cc): when the network
// carries every peer, 2 MiB rings and 512 KiB pieces (each socket piece costs hand-offs and
// waits that 128 KiB pieces could not amortize); with shared-memory peers, NCCL_BUFFSIZE's
// 1 MiB and 128 KiB; NCCL_BUFFSIZE and ACCL_CHUNK_SIZE, when set, win. The INIT line says
// what was chosen, and an all-reduce over many pieces stays exact.
// Parameters are read once per process, so every case runs in a fresh child process.
#include <cstdlib>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <string>
#include <utility>
#include <vector>
#include "api/thread_ranks_util.h"
#include "common/text_file.h"
#include "nccl.h"

using accl_test::occurrences;
using accl_test::readFile;
using accltest::runRanks;

namespace {

// 2 thread ranks with `env`: an all-reduce of a few MiB (an odd count: a short last piece),
// checked element by element. Returns the INIT log, or "child failed".
std::string initLogOfAllReduce(const std::vector<std::pair<const char*, const char*>>& env) {
  const std::string log = testing::TempDir() + "accl_pipeline_" + std::to_string(getpid()) + ".log";
  unlink(log.c_str());
  pid_t pid = fork();
  if (pid == 0) {
    for (const char* name : {"NCCL_SHM_DISABLE", "NCCL_BUFFSIZE", "ACCL_CHUNK_SIZE"}) unsetenv(name);
    setenv("NCCL_NET_PLUGIN", "none", 1);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
    setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
    for (const auto& [name, value] : env) setenv(name, value, 1);
    std::atomic<int> wrong{0};
    const size_t n = (3 << 20) / sizeof(float) + 7;
    runRanks(2, [&](int rank, ncclComm_t& comm) {
      std::vector<float> in(n), out(n, -1.0f);
      for (size_t i = 0; i < n; i++) in[i] = static_cast<float>((i % 1000) * (rank + 1));
      if (ncclAllReduce(in.data(), out.data(), n, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) wrong++;
      for (size_t i = 0; i < n; i++)
        if (out[i] != static_cast<float>((i % 1000) * 3)) wrong++;
    });
    _exit(wrong.load() == 0 && !testing::Test::HasFailure() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::string text = readFile(log);
  unlink(log.c_str());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? text : "child failed";
}

}  // namespace

TEST(NetPipelineSize, SocketsOnlyGetBiggerRingsAndPieces) {
  std::string text = initLogOfAllReduce({{"NCCL_SHM_DISABLE", "1"}});
  EXPECT_EQ(occurrences(text, "NET (1 peers), channel 2097152 bytes, pieces of 524288 bytes"), 2) << text;
}

TEST(NetPipelineSize, SharedMemoryPeersKeepTheDefaults) {
  std::string text = initLogOfAllReduce({});
  EXPECT_EQ(occurrences(text, "SHM (1 peers), channel 1048576 bytes, pieces of 131072 bytes"), 2) << text;
}

TEST(NetPipelineSize, ExplicitBufferAndChunkSizesWin) {
  // A 1 MiB ring holds four pieces of at most 256 KiB.
  std::string text = initLogOfAllReduce({{"NCCL_SHM_DISABLE", "1"}, {"NCCL_BUFFSIZE", "1048576"}});
  EXPECT_EQ(occurrences(text, "NET (1 peers), channel 1048576 bytes, pieces of 262144 bytes"), 2) << text;
  text = initLogOfAllReduce({{"NCCL_SHM_DISABLE", "1"}, {"ACCL_CHUNK_SIZE", "65536"}});
  EXPECT_EQ(occurrences(text, "NET (1 peers), channel 2097152 bytes, pieces of 65536 bytes"), 2) << text;
}
