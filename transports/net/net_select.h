// net_select.h: which net module carries a communicator's traffic between hosts, and the
// connections through it. The candidates are, in NCCL's order, the external plugins
// (transports/plugin/), the internal IB module when a usable RDMA port exists
// (transports/ib/ib_net.h), then the internal socket transport. NCCL_NET (or config.netName)
// keeps only the module of that name (case-insensitive). A module is used when its init
// succeeds, it reports at least one device and that device can send host memory
// (NCCL_PTR_HOST). One INFO line says which module was chosen and why the others were not.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "topo/nic_choice.h"
#include "transports/setup.h"
#include "transports/net/net_connection.h"
#include "transports/net/net_module.h"
#include "transports/plugin/plugin_net.h"

namespace accl::net {

struct NetChoice {
  NetModule* module = nullptr;  // nullptr: the internal socket transport (native byte ring)
  int dev = 0;
  std::string why;  // for the INFO line
  std::unique_ptr<NetPluginHold> hold;  // keeps the module's library loaded
};

// `netName`: NCCL_NET / config.netName, empty for "any". Fails (with a WARN naming the
// modules there are) when the name matches no usable module. Of a plugin's host-memory
// devices, the one closest to `where` (the rank's GPU or NUMA node; null: unknown) is used.
ncclResult_t chooseNetModule(const std::string& netName, const topo::RankLocality* where, NetChoice* choice);

// Per communicator state of a plugin module: its context, progress thread and its hold on
// the library (released last, so the library outlives every call into it).
struct NetCommState {
  NetModule* module = nullptr;
  void* ctx = nullptr;
  std::shared_ptr<NetWorker> worker;
  std::unique_ptr<NetPluginHold> hold;
  ~NetCommState();
};

// Connects to every peer in `peers` through `choice.module`: a listen comm per peer, handles
// swapped over the bootstrap, then non-blocking connect/accept until all are up (bounded by
// ACCL_SOCKET_CONNECT_TIMEOUT_MSEC; every peer that is still missing is named).
// The module's per-communicator state goes to *state (keep it until the connections are gone).
ncclResult_t connectNetPeers(const TransportSetup& c, NetChoice& choice, const std::vector<int>& peers,
                             std::unique_ptr<NetCommState>* state);

}  // namespace accl::net
