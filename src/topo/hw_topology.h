// hw_topology.h: the machine as hwloc sees it: packages, NUMA nodes, cores, PCI devices
// (GPUs, NICs) and NUMA distances, read from this machine, from an hwloc XML file
// (NCCL_TOPO_FILE) or from an hwloc synthetic description (tests). `accl-info --topo` prints
// it and NCCL_TOPO_DUMP_FILE writes it as hwloc XML.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "nccl.h"

namespace accl::topo {

struct NumaNode {
  int osIndex = -1;
  std::string cpus;       // cpuset as a list, "0-3,8-11"
  uint64_t memBytes = 0;  // local memory
};

struct PciDevice {
  enum class Kind { Gpu, Nic, Other };
  std::string busId;               // "0000:3b:00.0"
  Kind kind = Kind::Other;
  unsigned classId = 0;            // PCI class (0x0200 ethernet, 0x0207 InfiniBand, 0x0302 3D)
  std::vector<std::string> names;  // OS devices behind it: eth0, mlx5_0, cuda0 ...
  int numa = -1;                   // OS index of the NUMA node it hangs off (-1 unknown)
  std::vector<uint32_t> path;      // gp_index of every ancestor, root first (for distances)
};

struct HwTopology {
  std::string source;  // "this machine", "XML file F", "synthetic S"
  int packages = 0;
  int cores = 0;
  int pus = 0;
  std::vector<NumaNode> numa;
  std::vector<PciDevice> pci;
  std::vector<std::vector<uint64_t>> numaDistances;  // [i][j] by position in `numa`; empty if unknown
};

// Reads the topology: from `xmlFile` (hwloc XML) if non-empty, else `synthetic` if non-empty,
// else NCCL_TOPO_FILE if set, else this machine. Errors name the file and hwloc's reason.
ncclResult_t loadHwTopology(HwTopology* out, const std::string& xmlFile = "", const std::string& synthetic = "");

// Writes the same source's topology as hwloc XML to `path` (NCCL_TOPO_DUMP_FILE).
ncclResult_t dumpHwTopology(const std::string& path, const std::string& xmlFile = "",
                            const std::string& synthetic = "");

// Human-readable, for `accl-info --topo`.
std::string formatHwTopology(const HwTopology& t);

// Hops between two devices through their closest common ancestor (PCI switch, host bridge,
// package, machine); lower is closer.
int pciHops(const PciDevice& a, const PciDevice& b);

// The device with PCI bus id `busId`, or nullptr. Case does not matter: the CUDA driver writes
// upper-case hex ("0000:3B:00.0"), hwloc and sysfs lower-case.
const PciDevice* findPciDevice(const HwTopology& t, const std::string& busId);
// The NIC closest to the PCI device `busId` (a GPU): index into t.pci, -1 if there is no NIC
// or no such device. Ties go to the NIC listed first (lowest bus id).
int closestNic(const HwTopology& t, const std::string& busId);

}  // namespace accl::topo
