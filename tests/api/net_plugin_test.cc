// External net plugins (ours: the TCP test plugin and libnccl-net-accl.so), loaded as NCCL 2.28 loads them (NCCL_NET_PLUGIN, ncclNetPlugin_v11..v6):
// the collective matrix runs through our TCP test plugin (tests/netplugin/) built for each ABI
// version, with shared memory off so every byte between ranks goes through the plugin, and
// the log must name the ABI version the host picked. Also: a plugin whose init fails or that
// has no device is reported clearly, NCCL_NET_PLUGIN=none and a missing library fall back to
// the internal socket transport.
#include <gtest/gtest.h>
#include <tuple>
#include <unistd.h>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "common/collective_matrix.h"
#include "common/rank_runner.h"
#include "common/text_file.h"

using namespace accl_test;

namespace {

std::string buildDir() {
  const char* d = std::getenv("ACCL_TEST_BUILD_DIR");
  return d ? d : ".";
}

// "accl" is our socket module exported as a plugin; the others are the TCP test plugin's builds.
std::string pluginPath(const std::string& variant) {
  if (variant == "accl") return buildDir() + "/lib/libnccl-net-accl.so";
  return buildDir() + "/lib/libnccl-net-testtcp-" + variant + ".so";
}

std::string logPath(const std::string& what) {
  return "/tmp/accl-netplugin-" + std::to_string(getpid()) + "-" + what + ".log";
}

using accl_test::readFile;

std::string warnLines(const std::string& text) {
  std::string out, line;
  std::istringstream in(text);
  while (std::getline(in, line))
    if (line.find("WARN") != std::string::npos) out += line + "\n";
  return out;
}

std::vector<std::string> logEnv(const std::string& log) {
  return {"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET", "NCCL_DEBUG_FILE=" + log};
}

// Two ranks as threads; returns the init result of rank 0 (both get the same).
ncclResult_t initTwoRanks() {
  ncclComm_t comms[2];
  int devs[2] = {0, 0};
  ncclResult_t res = ncclCommInitAll(comms, 2, devs);
  if (res == ncclSuccess)
    for (ncclComm_t c : comms) ncclCommDestroy(c);
  return res;
}

}  // namespace

using PluginParam = std::tuple<const char*, const char*, const char*, int>;  // variant, name, symbol, ranks
class NetPluginMatrix : public testing::TestWithParam<PluginParam> {};

TEST_P(NetPluginMatrix, EveryCaseMatchesTheReferenceThroughThePlugin) {
  const auto [variant, name, symbol, n] = GetParam();
  if (const ChildRole* role = childRole()) return expectMatrixPassesInChild(*role, MatrixScope{});
  const std::string log = logPath(variant);
  std::vector<std::string> env = logEnv(log);
  env.push_back("NCCL_SHM_DISABLE=1");
  env.push_back("NCCL_NET_PLUGIN=" + pluginPath(variant));
  env.push_back(std::string("NCCL_NET=") + name);  // no silent fallback to the internal socket transport
  ChildResult result = runChildProcesses(1, false, n, env, 580);
  std::string text = readFile(log);
  unlink(log.c_str());
  EXPECT_TRUE(result.ok) << result.report << "\nWARN lines of the run:\n" << warnLines(text);
  const std::string loaded = std::string("NET/Plugin: loaded ") + name + " from " + pluginPath(variant) + " (" + symbol + ")";
  const std::string chosen = std::string("NET/") + name + ": net plugin " + name + " from " + pluginPath(variant);
  EXPECT_NE(text.find(loaded), std::string::npos) << loaded << "\n" << text.substr(0, 4000);
  EXPECT_NE(text.find(chosen), std::string::npos) << chosen << "\n" << text.substr(0, 4000);
}

INSTANTIATE_TEST_SUITE_P(, NetPluginMatrix,
                         testing::Values(PluginParam{"v6", "TestTCP", "ncclNetPlugin_v6", 2},
                                         PluginParam{"v8", "TestTCP", "ncclNetPlugin_v8", 3},
                                         PluginParam{"v11", "TestTCP", "ncclNetPlugin_v11", 2},
                                         PluginParam{"all", "TestTCP", "ncclNetPlugin_v11", 3},
                                         PluginParam{"accl", "Socket", "ncclNetPlugin_v11", 3}),
                         [](const testing::TestParamInfo<PluginParam>& info) {
                           return std::string(std::get<0>(info.param)) + "On" +
                                  std::to_string(std::get<3>(info.param)) + "Ranks";
                         });

// Each case: extra environment, whether init must succeed, text the log must contain.
struct SelectionCase {
  const char* name;
  std::vector<std::string> env;
  bool initOk;
  std::vector<std::string> logHas;
};

class NetPluginSelection : public testing::TestWithParam<SelectionCase> {};

TEST_P(NetPluginSelection, InitResultAndLogSayWhatWasLoadedAndWhy) {
  const SelectionCase& c = GetParam();
  if (const ChildRole* role = childRole()) {
    (void)role;
    ncclResult_t res = initTwoRanks();
    if (c.initOk) EXPECT_EQ(res, ncclSuccess);
    else EXPECT_NE(res, ncclSuccess);
    return;
  }
  const std::string log = logPath(c.name);
  std::vector<std::string> env = logEnv(log);
  env.push_back("NCCL_SHM_DISABLE=1");
  for (std::string e : c.env) {
    size_t at = e.find("@PLUGIN_");
    if (at != std::string::npos) e = e.substr(0, at) + pluginPath(e.substr(at + 8));
    env.push_back(e);
  }
  ChildResult result = runChildProcesses(1, false, 2, env, 120);
  std::string text = readFile(log);
  unlink(log.c_str());
  EXPECT_TRUE(result.ok) << result.report;
  for (const std::string& want : c.logHas) EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
}

INSTANTIATE_TEST_SUITE_P(
    , NetPluginSelection,
    testing::Values(
        SelectionCase{"InitFailsWithNcclNetSet",
                      {"NCCL_NET_PLUGIN=@PLUGIN_v8", "NCCL_NET=TestTCP", "TCPNET_FAIL_INIT=1"},
                      false,
                      {"TestTCP: init fails on purpose", "NCCL_NET=TestTCP: the net plugin TestTCP",
                       "cannot be used: its init failed"}},
        SelectionCase{"InitFailsFallsBackToSocket",
                      {"NCCL_NET_PLUGIN=@PLUGIN_v11", "TCPNET_FAIL_INIT=1"},
                      true,
                      {"is not used: its init failed", "NET/Socket: internal Socket; skipped TestTCP: its init failed"}},
        SelectionCase{"NoDeviceWithNcclNetSet",
                      {"NCCL_NET_PLUGIN=@PLUGIN_v6", "NCCL_NET=testtcp", "TCPNET_NO_DEVICE=1"},
                      false,
                      {"cannot be used: it reports no device"}},
        SelectionCase{"NoneMeansInternalSocket",
                      {"NCCL_NET_PLUGIN=none"},
                      true,
                      {"NCCL_NET_PLUGIN=none: no external plugin", "NET/Socket: internal Socket"}},
        SelectionCase{"MissingLibraryTriesBothNames",
                      {"NCCL_NET_PLUGIN=nosuchnet"},
                      true,
                      {"NET/Plugin: nosuchnet not found", "NET/Plugin: libnccl-net-nosuchnet.so not found",
                       "NET/Socket: internal Socket (no external net plugin loaded)"}},
        SelectionCase{"CommaListTakesTheFirstUsable",
                      {"NCCL_NET_PLUGIN=nosuchnet,@PLUGIN_v8"},
                      true,
                      {"NET/Plugin: libnccl-net-nosuchnet.so not found", "(ncclNetPlugin_v8)",
                       "NET/TestTCP: net plugin TestTCP"}},
        // Two devices on the topology of tests/unit/data/two_numa_gpu_nic.xml: device 0 behind
        // NUMA node 1's NIC, device 1 behind node 0's. This machine's CPUs are node 0's there,
        // so a host rank must take device 1.
        SelectionCase{"DeviceClosestToTheRanksNumaNode",
                      {"NCCL_NET_PLUGIN=@PLUGIN_v11", "NCCL_NET=TestTCP",
                       "NCCL_TOPO_FILE=" ACCL_TEST_DATA_DIR "/two_numa_gpu_nic.xml",
                       "TCPNET_PCI_PATHS=/sys/devices/pci0000:20/0000:20:00.0/0000:22:00.0;"
                       "/sys/devices/pci0000:10/0000:10:00.0/0000:12:00.0"},
                      true,
                      {"net plugin TestTCP from", ", device 1 (",
                       "is device 1 of 2: closest to the rank's NUMA node 0: ", " (0000:12:00.0) on NUMA node 0; others: ",
                       " (0000:22:00.0) on NUMA node 1 (distance 21)"}},
        SelectionCase{"UnknownNcclNetIsAnError",
                      {"NCCL_NET=Foo"},
                      false,
                      {"NCCL_NET=Foo matches no usable network module; modules present: IB, Socket"}},
        // This machine has no RDMA device: one INFO line says so, and NCCL_NET=IB is an error.
        SelectionCase{"NoIbDeviceFallsBackToSocketWithOneInfoLine",
                      {"NCCL_NET_PLUGIN=none"},
                      true,
                      {"NET/IB: no usable IB device (", "; using Socket"}},
        SelectionCase{"NcclNetIbWithoutDeviceIsAnError",
                      {"NCCL_NET=IB", "NCCL_IB_HCA=^mlx5_1"},
                      false,
                      {"NCCL_NET=IB cannot be used: no usable IB device"}}),
    [](const testing::TestParamInfo<SelectionCase>& info) { return std::string(info.param.name); });
