// ib_devices.h: which InfiniBand/RoCE ports ACCL may use. Discovery goes through a thin verbs
// seam (VerbsApi) so the selection rules are tested with a fake device list; the real one
// dlopen()s rdma-core's libibverbs.so.1 (no link-time dependency, as NCCL). NCCL_IB_HCA is
// applied as NCCL defines it: a comma list of name[:port]; names are prefixes unless the list
// starts with '=' (exact), and '^' excludes the listed ports instead.
//
// The same seam opens a port for the data path (ib_net.h): tests hand the IB module a fake
// fabric (tests/unit/ib_fake_verbs.h) in place of libibverbs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "nccl.h"
#include "transports/ib/verbs_seam.h"

namespace accl::ib {

struct IbPort {
  std::string device;  // "mlx5_0"
  int port = 1;
  bool active = false;  // IBV_PORT_ACTIVE
  bool ethernet = false;  // RoCE (link layer Ethernet) rather than InfiniBand
  int speedMbps = 0;      // active speed x width; 0 = unknown
  uint64_t guid = 0;      // node GUID (host byte order)
  std::string pciPath = {};  // /sys/devices/... of the device; empty = unknown
};

class VerbsApi {
 public:
  virtual ~VerbsApi() = default;
  // Every port of every device; *why says what went wrong when none can be listed.
  virtual ncclResult_t listPorts(std::vector<IbPort>* out, std::string* why) = 0;
  // A verbs context on one port for one connection (its objects die with it); null with *why.
  virtual std::unique_ptr<Verbs> open(const IbPort& port, std::string* why) = 0;
};
std::unique_ptr<VerbsApi> systemVerbs();  // libibverbs.so.1

struct HcaSpec {
  struct Item {
    std::string name;
    int port = -1;  // -1: any port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Item> items;  // empty: every device
};
HcaSpec parseHcaSpec(const std::string& text);
bool matchesHca(const HcaSpec& spec, const IbPort& port);

// The active ports NCCL_IB_HCA admits, in discovery order.
std::vector<IbPort> usablePorts(const std::vector<IbPort>& all, const HcaSpec& spec);

}  // namespace accl::ib
