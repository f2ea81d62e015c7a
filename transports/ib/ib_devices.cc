// ib_devices.cc: NCCL_IB_HCA rules and port discovery through libibverbs.
#include "transports/ib/ib_devices.h"
#include <dlfcn.h>
#include <endian.h>
#include <infiniband/verbs.h>
#include <climits>
#include <cstdlib>
#include "transports/ib/verbs_system.h"

namespace accl::ib {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// ibv_port_attr's active_speed (per lane) and active_width codes, in Mbit/s and lanes.
int laneMbps(uint8_t speed) {
  switch (speed) {
    case 1: return 2500;     // SDR
    case 2: return 5000;     // DDR
    case 4: return 10000;    // QDR
    case 8: return 10000;    // FDR10
    case 16: return 14000;   // FDR
    case 32: return 25000;   // EDR
    case 64: return 50000;   // HDR
    case 128: return 100000; // NDR
    default: return 0;
  }
}
int lanes(uint8_t width) {
  switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

std::string pciPathOf(const std::string& device) {
  std::string link = "/sys/class/infiniband/" + device + "/device";
  char buf[PATH_MAX];
  return realpath(link.c_str(), buf) ? std::string(buf) : std::string();
}

// libibverbs through dlopen: a host without rdma-core still runs ACCL.
class SystemVerbs final : public VerbsApi {
 public:
  ncclResult_t listPorts(std::vector<IbPort>* out, std::string* why) override {
    out->clear();
    void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      *why = "libibverbs.so.1 not found (rdma-core not installed)";
      return ncclSuccess;
    }
    using GetList = ibv_device** (*)(int*);
    using FreeList = void (*)(ibv_device**);
    using GetName = const char* (*)(ibv_device*);
    using Open = ibv_context* (*)(ibv_device*);
    using Close = int (*)(ibv_context*);
    using QueryDevice = int (*)(ibv_context*, ibv_device_attr*);
    using QueryPort = int (*)(ibv_context*, uint8_t, ibv_port_attr*);
    auto getList = reinterpret_cast<GetList>(dlsym(lib, "ibv_get_device_list"));
    auto freeList = reinterpret_cast<FreeList>(dlsym(lib, "ibv_free_device_list"));
    auto getName = reinterpret_cast<GetName>(dlsym(lib, "ibv_get_device_name"));
    auto openDev = reinterpret_cast<Open>(dlsym(lib, "ibv_open_device"));
    auto close = reinterpret_cast<Close>(dlsym(lib, "ibv_close_device"));
    auto queryDevice = reinterpret_cast<QueryDevice>(dlsym(lib, "ibv_query_device"));
    auto queryPort = reinterpret_cast<QueryPort>(dlsym(lib, "ibv_query_port"));
    if (!getList || !freeList || !getName || !openDev || !close || !queryDevice || !queryPort) {
      *why = "libibverbs.so.1 lacks a verbs entry point";
      dlclose(lib);
      return ncclSuccess;
    }
    int n = 0;
    ibv_device** devs = getList(&n);
    if (!devs || n == 0) *why = "no RDMA device (ibv_get_device_list found none)";
    for (int i = 0; devs && i < n; i++) {
      ibv_context* ctx = openDev(devs[i]);
      if (!ctx) continue;
      ibv_device_attr attr{};
      if (queryDevice(ctx, &attr) == 0) {
        for (int p = 1; p <= attr.phys_port_cnt; p++) {
          ibv_port_attr pa{};
          if (queryPort(ctx, static_cast<uint8_t>(p), &pa) != 0) continue;
          IbPort port;
          port.device = getName(devs[i]);
          port.port = p;
          port.active = pa.state == IBV_PORT_ACTIVE;
          port.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
          port.speedMbps = laneMbps(pa.active_speed) * lanes(pa.active_width);
          port.guid = be64toh(attr.node_guid);
          port.pciPath = pciPathOf(port.device);
          out->push_back(port);
        }
      }
      close(ctx);
    }
    if (devs) freeList(devs);
    dlclose(lib);
    return ncclSuccess;
  }
  std::unique_ptr<Verbs> open(const IbPort& port, std::string* why) override {
    return openSystemVerbs(port.device, port.port, why);
  }
};

}  // namespace

std::unique_ptr<VerbsApi> systemVerbs() { return std::make_unique<SystemVerbs>(); }

HcaSpec parseHcaSpec(const std::string& text) {
  HcaSpec spec;
  std::string s = trim(text);
  if (!s.empty() && s[0] == '^') {
    spec.exclude = true;
    s = s.substr(1);
  }
  if (!s.empty() && s[0] == '=') {
    spec.exact = true;
    s = s.substr(1);
  }
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    std::string item = trim(s.substr(start, comma - start));
    if (!item.empty()) {
      HcaSpec::Item it;
      size_t colon = item.find(':');
      it.name = item.substr(0, colon);
      if (colon != std::string::npos) it.port = std::atoi(item.c_str() + colon + 1);
      spec.items.push_back(it);
    }
    start = comma + 1;
  }
  return spec;
}

bool matchesHca(const HcaSpec& spec, const IbPort& port) {
  if (spec.items.empty()) return true;
  bool listed = false;
  for (const HcaSpec::Item& it : spec.items) {
    bool name = spec.exact ? port.device == it.name : port.device.compare(0, it.name.size(), it.name) == 0;
    listed = listed || (name && (it.port < 0 || it.port == port.port));
  }
  return spec.exclude ? !listed : listed;
}

std::vector<IbPort> usablePorts(const std::vector<IbPort>& all, const HcaSpec& spec) {
  std::vector<IbPort> out;
  for (const IbPort& p : all)
    if (p.active && matchesHca(spec, p)) out.push_back(p);
  return out;
}

}  // namespace accl::ib
