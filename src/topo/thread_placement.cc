// thread_placement.cc: choosing the CPUs of a rank's helper threads (see thread_placement.h).
#include "topo/thread_placement.h"
#include <sched.h>
#include <algorithm>
#include "base/check.h"
#include "base/param.h"

namespace accl::topo {
namespace {

// Index into t.numa of the node with OS index `os`, -1 if none.
int numaByOsIndex(const HwTopology& t, int os) {
  for (size_t i = 0; i < t.numa.size(); i++)
    if (t.numa[i].osIndex == os) return static_cast<int>(i);
  return -1;
}

}  // namespace

ThreadPlacement chooseThreadPlacement(const HwTopology& t, const PlacementInput& in) {
  ThreadPlacement r;
  int node = -1;
  std::string source;
  if (!in.gpuBusId.empty()) {
    const PciDevice* gpu = findPciDevice(t, in.gpuBusId);
    if (gpu == nullptr) {
      source = "GPU " + in.gpuBusId + " is not in the topology; ";
    } else if (gpu->numa < 0 || (node = numaByOsIndex(t, gpu->numa)) < 0) {
      source = "GPU " + in.gpuBusId + " has no known NUMA node; ";
    } else {
      source = "GPU " + in.gpuBusId + " is on NUMA node " + std::to_string(gpu->numa);
    }
  }
  if (node < 0) {
    for (size_t i = 0; i < t.numa.size() && node < 0; i++) {
      CpuMask cpus;
      if (CpuMask::parseList(t.numa[i].cpus, &cpus) && cpus.has(in.currentCpu)) node = static_cast<int>(i);
    }
    if (node < 0) {
      r.why = source + "CPU " + std::to_string(in.currentCpu) + " of the init thread is on no known NUMA node; " +
              "threads keep the process's affinity";
      return r;
    }
    source += "the init thread runs on CPU " + std::to_string(in.currentCpu) + " of NUMA node " +
              std::to_string(t.numa[node].osIndex);
  }
  CpuMask nodeCpus;
  if (!CpuMask::parseList(t.numa[node].cpus, &nodeCpus) || nodeCpus.empty()) {
    r.why = source + ", whose CPU list '" + t.numa[node].cpus + "' is empty or unreadable; threads keep the " +
            "process's affinity";
    return r;
  }
  r.numa = t.numa[node].osIndex;
  if (in.ignoreProcessMask) {
    r.cpus = nodeCpus;
    r.why = source + ": CPUs " + nodeCpus.list() + " (NCCL_IGNORE_CPU_AFFINITY=1: the process's affinity " +
            in.processMask.list() + " is ignored)";
    return r;
  }
  r.cpus = nodeCpus.intersect(in.processMask);
  if (r.cpus.empty()) {
    r.why = source + ", but its CPUs " + nodeCpus.list() + " are outside the process's affinity " +
            in.processMask.list() + "; threads keep the process's affinity";
    return r;
  }
  r.why = source + ": CPUs " + r.cpus.list() + " (node " + nodeCpus.list() + " within the process's affinity " +
          in.processMask.list() + ")";
  return r;
}

const HwTopology* processHwTopology() {
  static const HwTopology* topo = [] {
    auto* t = new HwTopology;  // kept for the life of the process, like NCCL's system graph
    if (loadHwTopology(t) != ncclSuccess) {
      delete t;
      return static_cast<HwTopology*>(nullptr);
    }
    return t;
  }();
  return topo;
}

ThreadPlacement placeRankThreads(int rank, const std::string& gpuBusId) {
  ThreadPlacement r;
  const HwTopology* t = processHwTopology();
  if (!t) {
    r.why = "no topology (hwloc failed); threads keep the process's affinity";
  } else {
    PlacementInput in;
    in.gpuBusId = gpuBusId;
    in.currentCpu = sched_getcpu();
    in.processMask = CpuMask::ofCurrentThread();
    in.ignoreProcessMask = param::ignoreCpuAffinity() != 0;
    r = chooseThreadPlacement(*t, in);
  }
  INFO(kSubsysInit, "rank %d: helper threads on CPUs %s: %s", rank,
       r.cpus.empty() ? "(unchanged)" : r.cpus.list().c_str(), r.why.c_str());
  return r;
}

}  // namespace accl::topo
