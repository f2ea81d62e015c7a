// Net plugin lifetime as NCCL 2.28 has it: a library NCCL_NET_PLUGIN names is loaded when a
// communicator needs it, shared by every communicator using it, and dlclose()d when the last
// of them is destroyed; the next communicator loads it again and its init runs again.
// NCCL_NET_PLUGIN_REF_COUNT=1 keeps it loaded for good. Checked on this process's mappings
// (/proc/self/maps) and on the lines the TCP test plugin and ACCL log for each load.
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "nccl.h"
#include "common/text_file.h"

namespace {

std::string pluginPath(const std::string& variant) {
  const char* d = std::getenv("ACCL_TEST_BUILD_DIR");
  std::string path = std::string(d ? d : ".") + "/lib/libnccl-net-testtcp-" + variant + ".so";
  char real[PATH_MAX];
  return realpath(path.c_str(), real) ? real : path;
}

bool mapped(const std::string& file) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(file) != std::string::npos) return true;
  return false;
}

using accl_test::readFile;
using accl_test::occurrences;

// Two ranks as threads of this process, talking through the plugin; checks a sum.
void initPair(ncclComm_t comms[2]) {
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  std::vector<int> a(1000, 1), b(1000, 2);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclInt32, ncclSum, comms[0], nullptr), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b.data(), b.data(), b.size(), ncclInt32, ncclSum, comms[1], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(a[999], 3);
  EXPECT_EQ(b[0], 3);
}

struct LogEnv {
  explicit LogEnv(const std::string& variant, const char* refCount) {
    log = "/tmp/accl-plugin-lifetime-" + std::to_string(getpid()) + ".log";
    lib = pluginPath(variant);
    setenv("NCCL_NET_PLUGIN", lib.c_str(), 1);
    setenv("NCCL_NET", "TestTCP", 1);  // no silent fallback to the internal sockets
    setenv("NCCL_SHM_DISABLE", "1", 1);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
    setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
    if (refCount) setenv("NCCL_NET_PLUGIN_REF_COUNT", refCount, 1);
  }
  ~LogEnv() { unlink(log.c_str()); }
  std::string log, lib;
};

}  // namespace

class NetPluginLifetime : public testing::TestWithParam<const char*> {};

TEST_P(NetPluginLifetime, UnloadedWhenTheLastCommunicatorUsingItIsDestroyed) {
  LogEnv env(GetParam(), nullptr);
  ASSERT_FALSE(mapped(env.lib));
  constexpr int kCycles = 3;
  for (int cycle = 0; cycle < kCycles; cycle++) {
    ncclComm_t first[2], second[2];
    initPair(first);
    EXPECT_TRUE(mapped(env.lib)) << "cycle " << cycle;
    initPair(second);  // shares the loaded library
    for (ncclComm_t c : first) ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
    EXPECT_TRUE(mapped(env.lib)) << "cycle " << cycle << ": unloaded while communicators still use it";
    for (ncclComm_t c : second) ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
    EXPECT_FALSE(mapped(env.lib)) << "cycle " << cycle << ": still loaded after its last communicator";
  }
  std::string text = readFile(env.log);
  // One load, one plugin init (the plugin logs its device at init) and one unload per cycle.
  EXPECT_EQ(occurrences(text, "NET/Plugin: loaded TestTCP"), kCycles) << text.substr(0, 3000);
  EXPECT_EQ(occurrences(text, "TestTCP: device 0 is"), kCycles) << text.substr(0, 3000);
  EXPECT_EQ(occurrences(text, "NET/Plugin: unloading TestTCP"), kCycles) << text.substr(0, 3000);
}

TEST_P(NetPluginLifetime, RefCountOneKeepsItLoadedAndInitializedOnce) {
  LogEnv env(GetParam(), "1");
  for (int cycle = 0; cycle < 3; cycle++) {
    ncclComm_t comms[2];
    initPair(comms);
    for (ncclComm_t c : comms) ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
    EXPECT_TRUE(mapped(env.lib)) << "cycle " << cycle;
  }
  std::string text = readFile(env.log);
  EXPECT_EQ(occurrences(text, "NET/Plugin: loaded TestTCP"), 1) << text.substr(0, 3000);
  EXPECT_EQ(occurrences(text, "TestTCP: device 0 is"), 1) << text.substr(0, 3000);
  EXPECT_EQ(occurrences(text, "NET/Plugin: unloading"), 0) << text.substr(0, 3000);
}

INSTANTIATE_TEST_SUITE_P(, NetPluginLifetime, testing::Values("v8", "v11"));
