// nic_choice.h: which of the usable network devices a rank uses: the one closest to its GPU
// (fewest PCI hops through their common ancestor) or, for a host rank, to its NUMA node
// (same node first, then by NUMA distance). Candidates come in the order the selection rules
// gave them (NCCL_SOCKET_IFNAME, the HPN rule, a plugin's device list); ties and devices the
// topology does not know keep that order, so without topology nothing changes.
#pragma once
#include <string>
#include <vector>
#include "topo/hw_topology.h"

namespace accl::topo {

// Where a rank sits: its GPU (PCI bus id, "" for none) and its NUMA node (OS index, -1 unknown).
struct RankLocality {
  std::string gpuBusId;
  int numa = -1;
};

struct NicCandidate {
  std::string name;   // interface or device name ("hpn0", "mlx5_1"); also matched against hwloc OS devices
  std::string busId;  // PCI bus id if known ("0000:22:00.0"), else ""
};

struct NicPick {
  int index = 0;  // into the candidates
  std::string why;
};

// Pure: the closest candidate on topology `t` (index 0 when none is closer). `nics` not empty.
NicPick chooseClosestNic(const HwTopology& t, const RankLocality& where, const std::vector<NicCandidate>& nics);

// "0000:22:00.0" from a sysfs device path such as /sys/devices/pci0000:20/0000:20:00.0/0000:22:00.0
// (a net plugin's pciPath): the last component shaped like a PCI bus id; "" if none.
std::string busIdOfPciPath(const std::string& path);

// The PCI device behind network interface `ifname` (/sys/class/net/<if>/device), "" for
// virtual interfaces (veth, lo, bridges) or when sysfs does not say.
std::string busIdOfInterface(const std::string& ifname);

}  // namespace accl::topo
