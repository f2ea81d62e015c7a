// hw_topology.cc: reading the machine through hwloc (see hw_topology.h).
#include "topo/hw_topology.h"
#include <cstdio>
#include <strings.h>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include "base/check.h"
#include "base/param.h"
#if ACCL_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace accl::topo {
namespace {

#if ACCL_HAVE_HWLOC
struct TopologyCloser {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyCloser>;

std::string topoFileParam() {
  const char* f = envGet("NCCL_TOPO_FILE");
  return f ? f : "";
}

ncclResult_t open(const std::string& xmlFile, const std::string& synthetic, TopologyPtr* out, std::string* source) {
  hwloc_topology_t raw;
  if (hwloc_topology_init(&raw) != 0) {
    WARN("topology: hwloc_topology_init failed");
    return ncclSystemError;
  }
  TopologyPtr t(raw);
  // Only CPUs, NUMA nodes and PCI devices are read, so hwloc's plugins for GPU runtimes stay
  // out of the process. Loaded, the OpenCL one brings every installed OpenCL driver: slow, and
  // PoCL's LLVM installs an alternate signal stack (malloc'd, 64 KiB + SIGSTKSZ) on the calling
  // thread. AddressSanitizer (GCC 12's libsanitizer) unmaps whatever alternate stack a thread
  // has when it exits and aborts on that one ("failed to deallocate 0x134c0 (79040) bytes").
  // LLVM keeps ASan's own stack (4 x SIGSTKSZ) where that is large enough, on CPUs with a big
  // signal frame (AVX-512/AMX), so only some machines showed it. Components not built into
  // this hwloc are refused (-1), which is fine.
  for (const char* plugin : {"opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"})
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, plugin);
  std::string xml = !xmlFile.empty() ? xmlFile : synthetic.empty() ? topoFileParam() : "";
  if (!xml.empty()) {
    if (hwloc_topology_set_xml(raw, xml.c_str()) != 0) {
      WARN("topology: cannot read hwloc XML file %s (NCCL_TOPO_FILE?)", xml.c_str());
      return ncclInvalidArgument;
    }
    *source = "XML file " + xml;
  } else if (!synthetic.empty()) {
    if (hwloc_topology_set_synthetic(raw, synthetic.c_str()) != 0) {
      WARN("topology: invalid hwloc synthetic description '%s'", synthetic.c_str());
      return ncclInvalidArgument;
    }
    *source = "synthetic " + synthetic;
  } else {
    *source = "this machine";
  }
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(raw) != 0) {
    WARN("topology: hwloc could not load the topology from %s", source->c_str());
    return ncclSystemError;
  }
  *out = std::move(t);
  return ncclSuccess;
}

std::string listOf(hwloc_const_bitmap_t set) {
  char* text = nullptr;
  hwloc_bitmap_list_asprintf(&text, set);
  std::string s = text ? text : "";
  std::free(text);
  return s;
}

PciDevice::Kind kindOf(unsigned classId) {
  if ((classId >> 8) == 0x02) return PciDevice::Kind::Nic;                      // network controller
  if ((classId >> 8) == 0x03 || classId == 0x1200) return PciDevice::Kind::Gpu;  // display/3D, accelerator
  return PciDevice::Kind::Other;
}

#endif  // ACCL_HAVE_HWLOC

const char* kindName(PciDevice::Kind k) {
  return k == PciDevice::Kind::Gpu ? "GPU" : k == PciDevice::Kind::Nic ? "NIC" : "PCI";
}

}  // namespace

#if ACCL_HAVE_HWLOC
ncclResult_t loadHwTopology(HwTopology* out, const std::string& xmlFile, const std::string& synthetic) {
  TopologyPtr t;
  HwTopology r;
  NCCLCHECK(open(xmlFile, synthetic, &t, &r.source));
  hwloc_topology_t topo = t.get();
  r.packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  r.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  r.pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  const int nnuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnuma; i++) {
    hwloc_obj_t n = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    r.numa.push_back({static_cast<int>(n->os_index), listOf(n->cpuset), n->attr->numanode.local_memory});
  }
  unsigned nd = 1;
  hwloc_distances_s* dist = nullptr;
  if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nd, &dist, HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) == 0 &&
      nd == 1) {
    r.numaDistances.assign(dist->nbobjs, std::vector<uint64_t>(dist->nbobjs));
    for (unsigned i = 0; i < dist->nbobjs; i++)
      for (unsigned j = 0; j < dist->nbobjs; j++) r.numaDistances[i][j] = dist->values[i * dist->nbobjs + j];
    hwloc_distances_release(topo, dist);
  }
  for (hwloc_obj_t p = hwloc_get_next_pcidev(topo, nullptr); p; p = hwloc_get_next_pcidev(topo, p)) {
    PciDevice d;
    char bus[32];
    snprintf(bus, sizeof(bus), "%04x:%02x:%02x.%x", p->attr->pcidev.domain, p->attr->pcidev.bus, p->attr->pcidev.dev,
             p->attr->pcidev.func);
    d.busId = bus;
    d.classId = p->attr->pcidev.class_id;
    d.kind = kindOf(d.classId);
    for (hwloc_obj_t c = p->io_first_child; c; c = c->next_sibling)
      if (c->type == HWLOC_OBJ_OS_DEVICE && c->name) d.names.push_back(c->name);
    if (hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, p); anc && anc->nodeset) {
      int first = hwloc_bitmap_first(anc->nodeset);
      if (first >= 0 && hwloc_bitmap_weight(anc->nodeset) == 1) d.numa = first;
    }
    for (hwloc_obj_t a = p; a; a = a->parent) d.path.insert(d.path.begin(), static_cast<uint32_t>(a->gp_index));
    if (d.kind != PciDevice::Kind::Other || !d.names.empty()) r.pci.push_back(std::move(d));
  }
  *out = std::move(r);
  return ncclSuccess;
}

ncclResult_t dumpHwTopology(const std::string& path, const std::string& xmlFile, const std::string& synthetic) {
  TopologyPtr t;
  std::string source;
  NCCLCHECK(open(xmlFile, synthetic, &t, &source));
  if (hwloc_topology_export_xml(t.get(), path.c_str(), 0) != 0) {
    WARN("topology: cannot write NCCL_TOPO_DUMP_FILE=%s", path.c_str());
    return ncclSystemError;
  }
  INFO(kSubsysGraph, "topology of %s written to %s (hwloc XML)", source.c_str(), path.c_str());
  return ncclSuccess;
}
#else
// Built without hwloc (libhwloc-dev was missing): no topology. Callers already treat a failed
// load as "unknown" (threads keep their affinity, NICs are chosen without distances).
ncclResult_t loadHwTopology(HwTopology*, const std::string&, const std::string&) {
  INFO(kSubsysInit, "topology: this build of ACCL has no hwloc (libhwloc-dev was not found at build time)");
  return ncclInvalidUsage;
}

ncclResult_t dumpHwTopology(const std::string& path, const std::string&, const std::string&) {
  WARN("topology: cannot write NCCL_TOPO_DUMP_FILE=%s: this build of ACCL has no hwloc", path.c_str());
  return ncclInvalidUsage;
}
#endif  // ACCL_HAVE_HWLOC

int pciHops(const PciDevice& a, const PciDevice& b) {
  size_t common = 0;
  while (common < a.path.size() && common < b.path.size() && a.path[common] == b.path[common]) common++;
  return static_cast<int>((a.path.size() - common) + (b.path.size() - common));
}

const PciDevice* findPciDevice(const HwTopology& t, const std::string& busId) {
  for (const PciDevice& d : t.pci)
    if (d.busId.size() == busId.size() && strncasecmp(d.busId.c_str(), busId.c_str(), busId.size()) == 0) return &d;
  return nullptr;
}

int closestNic(const HwTopology& t, const std::string& busId) {
  const PciDevice* gpu = findPciDevice(t, busId);
  if (gpu == nullptr) return -1;
  int best = -1;
  for (size_t i = 0; i < t.pci.size(); i++) {
    if (t.pci[i].kind != PciDevice::Kind::Nic) continue;
    if (best < 0 || pciHops(*gpu, t.pci[i]) < pciHops(*gpu, t.pci[best])) best = static_cast<int>(i);
  }
  return best;
}

std::string formatHwTopology(const HwTopology& t) {
  std::string s = "Topology (" + t.source + "): " + std::to_string(t.packages) + " package(s), " +
                  std::to_string(t.numa.size()) + " NUMA node(s), " + std::to_string(t.cores) + " core(s), " +
                  std::to_string(t.pus) + " hardware thread(s)\n";
  for (const NumaNode& n : t.numa)
    s += "  NUMA node " + std::to_string(n.osIndex) + ": CPUs " + n.cpus + ", " +
         std::to_string(n.memBytes >> 20) + " MiB\n";
  if (!t.numaDistances.empty()) {
    s += "  NUMA distances (latency):";
    for (const auto& row : t.numaDistances) {
      s += "\n   ";
      for (uint64_t v : row) s += " " + std::to_string(v);
    }
    s += "\n";
  }
  for (const PciDevice& d : t.pci) {
    char cls[8];
    snprintf(cls, sizeof(cls), "%04x", d.classId);
    s += std::string("  ") + kindName(d.kind) + " " + d.busId + " (class " + cls + ")";
    for (size_t i = 0; i < d.names.size(); i++) s += (i ? "," : " ") + d.names[i];
    s += d.numa >= 0 ? ", NUMA node " + std::to_string(d.numa) : ", NUMA node unknown";
    if (d.kind == PciDevice::Kind::Gpu) {
      int nic = closestNic(t, d.busId);
      if (nic >= 0)
        s += ", closest NIC " + t.pci[nic].busId +
             (t.pci[nic].names.empty() ? std::string() : " (" + t.pci[nic].names[0] + ")") + ", " +
             std::to_string(pciHops(d, t.pci[nic])) + " hops";
    }
    s += "\n";
  }
  return s;
}

}  // namespace accl::topo
