// Topology through hwloc, on machines this host is not: hwloc synthetic descriptions and an
// XML file (tests/unit/data/two_numa_gpu_nic.xml: two packages, each with a NUMA node and a
// PCI switch holding one GPU and one InfiniBand NIC). Checks the counts, NUMA placement of
// devices, NUMA distances, which NIC is closest to each GPU, and the XML dump round trip.
#include <gtest/gtest.h>
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>
#include <thread>
#include <cstdlib>
#include <string>
#include "topo/hw_topology.h"

using namespace accl::topo;

namespace {

const std::string kXml = std::string(ACCL_TEST_DATA_DIR) + "/two_numa_gpu_nic.xml";

const PciDevice* byName(const HwTopology& t, const std::string& name) {
  for (const PciDevice& d : t.pci)
    for (const std::string& n : d.names)
      if (n == name) return &d;
  return nullptr;
}

}  // namespace

TEST(HwTopology, SyntheticTwoPackagesCountsEverything) {
  HwTopology t;
  ASSERT_EQ(loadHwTopology(&t, "", "pack:2 numa:1 core:4 pu:2"), ncclSuccess);
  EXPECT_EQ(t.packages, 2);
  EXPECT_EQ(t.cores, 8);
  EXPECT_EQ(t.pus, 16);
  ASSERT_EQ(t.numa.size(), 2u);
  EXPECT_EQ(t.numa[0].cpus, "0-7");
  EXPECT_EQ(t.numa[1].cpus, "8-15");
  EXPECT_NE(formatHwTopology(t).find("2 package(s), 2 NUMA node(s), 8 core(s), 16 hardware thread(s)"),
            std::string::npos);
}

TEST(HwTopology, XmlFilePlacesGpusAndNicsOnTheirNumaNodes) {
  HwTopology t;
  ASSERT_EQ(loadHwTopology(&t, kXml), ncclSuccess);
  EXPECT_EQ(t.packages, 2);
  ASSERT_EQ(t.numa.size(), 2u);
  EXPECT_EQ(t.numa[1].memBytes, 2ull << 30);
  ASSERT_EQ(t.pci.size(), 4u);
  const PciDevice* gpu1 = byName(t, "cuda1");
  const PciDevice* nic0 = byName(t, "mlx5_0");
  ASSERT_TRUE(gpu1 && nic0);
  EXPECT_EQ(gpu1->kind, PciDevice::Kind::Gpu);
  EXPECT_EQ(gpu1->numa, 1);
  EXPECT_EQ(nic0->kind, PciDevice::Kind::Nic);
  EXPECT_EQ(nic0->numa, 0);
  EXPECT_EQ(gpu1->busId, "0000:21:00.0");
  ASSERT_EQ(t.numaDistances.size(), 2u);
  EXPECT_EQ(t.numaDistances[0][1], 21u);
  EXPECT_EQ(t.numaDistances[1][1], 10u);
}

TEST(HwTopology, ClosestNicIsTheOneBehindTheSamePciSwitch) {
  HwTopology t;
  ASSERT_EQ(loadHwTopology(&t, kXml), ncclSuccess);
  int nic = closestNic(t, byName(t, "cuda0")->busId);
  ASSERT_GE(nic, 0);
  EXPECT_EQ(t.pci[nic].names.front(), "mlx5_0");
  nic = closestNic(t, byName(t, "cuda1")->busId);
  ASSERT_GE(nic, 0);
  EXPECT_EQ(t.pci[nic].names.front(), "mlx5_1");
  // Same switch: GPU -> switch -> NIC; across packages the path climbs to the machine.
  EXPECT_EQ(pciHops(*byName(t, "cuda0"), *byName(t, "mlx5_0")), 2);
  EXPECT_GT(pciHops(*byName(t, "cuda0"), *byName(t, "mlx5_1")), 2);
  EXPECT_EQ(closestNic(t, "0000:99:00.0"), -1);
  EXPECT_NE(formatHwTopology(t).find("cuda1, NUMA node 1, closest NIC 0000:22:00.0 (mlx5_1), 2 hops"),
            std::string::npos)
      << formatHwTopology(t);
}

// The CUDA driver names a GPU "0000:2B:00.0" where hwloc says "0000:2b:00.0": the lookups that
// place threads and pick NICs by the GPU's bus id must find it either way.
TEST(HwTopology, GpuBusIdInTheDriversUpperCaseFindsHwlocsDevice) {
  HwTopology t;
  ASSERT_EQ(loadHwTopology(&t, kXml), ncclSuccess);
  auto* gpu = const_cast<PciDevice*>(byName(t, "cuda1"));
  ASSERT_NE(gpu, nullptr);
  gpu->busId = "0000:2b:00.0";  // as hwloc prints a bus number with a letter
  EXPECT_EQ(findPciDevice(t, "0000:2B:00.0"), gpu);
  const int nic = closestNic(t, "0000:2B:00.0");
  ASSERT_GE(nic, 0);
  EXPECT_EQ(t.pci[nic].names.front(), "mlx5_1");
  EXPECT_EQ(findPciDevice(t, "0000:2C:00.0"), nullptr);
}

TEST(HwTopology, DumpFileReadsBackAsTheSameTopology) {
  std::string path = "/tmp/accl-topo-" + std::to_string(getpid()) + ".xml";
  ASSERT_EQ(dumpHwTopology(path, kXml), ncclSuccess);
  HwTopology again;
  ASSERT_EQ(loadHwTopology(&again, path), ncclSuccess);
  unlink(path.c_str());
  HwTopology orig;
  ASSERT_EQ(loadHwTopology(&orig, kXml), ncclSuccess);
  EXPECT_EQ(formatHwTopology(again).substr(formatHwTopology(again).find(':')),
            formatHwTopology(orig).substr(formatHwTopology(orig).find(':')));
}

TEST(HwTopology, NcclTopoFileIsUsedWhenNoSourceIsGiven) {
  setenv("NCCL_TOPO_FILE", kXml.c_str(), 1);
  HwTopology t;
  ncclResult_t res = loadHwTopology(&t);
  unsetenv("NCCL_TOPO_FILE");
  ASSERT_EQ(res, ncclSuccess);
  EXPECT_EQ(t.source, "XML file " + kXml);
  EXPECT_EQ(t.pci.size(), 4u);
}

// Reading this machine loads none of hwloc's GPU-runtime plugins: with an OpenCL driver
// installed (PoCL, scripts/install-deps.sh), the OpenCL one brought LLVM into the process, which
// left its own alternate signal stack on the thread; AddressSanitizer then aborted when the
// thread exited (sanitize.Quick-asan-ubsan on AMD EPYC machines).
TEST(HwTopology, ReadingThisMachineLoadsNoGpuRuntimeAndKeepsTheThreadsSignalStack) {
  std::string leftover;
  std::thread reader([&] {
    stack_t before{}, after{};
    sigaltstack(nullptr, &before);
    HwTopology t;
    if (loadHwTopology(&t) != ncclSuccess) leftover = "loadHwTopology failed";
    sigaltstack(nullptr, &after);
    if (after.ss_sp != before.ss_sp || after.ss_size != before.ss_size || after.ss_flags != before.ss_flags)
      leftover = "the thread's alternate signal stack changed: " + std::to_string(after.ss_size) + " bytes at " +
                 std::to_string(reinterpret_cast<uintptr_t>(after.ss_sp));
    sigaltstack(&before, nullptr);  // what this test may have to undo before the thread exits
  });
  reader.join();
  EXPECT_EQ(leftover, "");
  for (const char* lib : {"libOpenCL.so.1", "libX11.so.6"})
    EXPECT_EQ(dlopen(lib, RTLD_NOW | RTLD_NOLOAD), nullptr) << lib << " was loaded into the process";
}

TEST(HwTopology, MissingXmlFileIsAClearError) {
  HwTopology t;
  EXPECT_EQ(loadHwTopology(&t, "/nonexistent/topo.xml"), ncclInvalidArgument);
}
