// thread_placement.h: which CPUs ACCL's own threads of a rank (socket and net-plugin
// progress threads, host-stream workers, the status server) run on. NCCL's rule: the CPUs
// of the NUMA node closest to the rank — its GPU's node when it has a GPU, else the node the
// thread calling init runs on — intersected with the process's affinity, unless
// NCCL_IGNORE_CPU_AFFINITY=1 (then the node's CPUs alone). An empty intersection leaves the
// threads where the process put them.
#pragma once
#include <string>
#include "topo/cpu_mask.h"
#include "topo/hw_topology.h"

namespace accl::topo {

struct PlacementInput {
  std::string gpuBusId;    // "0000:3b:00.0" from the device backend; "" for a host rank
  int currentCpu = -1;     // the CPU the init thread runs on (sched_getcpu)
  CpuMask processMask;     // the init thread's affinity
  bool ignoreProcessMask = false;  // NCCL_IGNORE_CPU_AFFINITY=1
};

struct ThreadPlacement {
  CpuMask cpus;   // empty: leave threads alone
  int numa = -1;  // OS index of the chosen NUMA node, -1 if none
  std::string why;
};

// Pure: the choice for one rank on topology `t`.
ThreadPlacement chooseThreadPlacement(const HwTopology& t, const PlacementInput& in);

// The process's topology, read once (NCCL_TOPO_FILE or this machine); null if hwloc failed.
const HwTopology* processHwTopology();

// The choice for the calling thread on this process's topology (logs one INFO line).
ThreadPlacement placeRankThreads(int rank, const std::string& gpuBusId);

}  // namespace accl::topo
