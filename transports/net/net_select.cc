// net_select.cc: choosing the net module and connecting peers through it.
#include "transports/net/net_select.h"
#include <strings.h>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include "base/check.h"
#include "base/param.h"
#include "topo/nic_choice.h"
#include "topo/thread_placement.h"
#include "transports/ib/ib_net.h"
#include "transports/plugin/plugin_net.h"

namespace accl::net {
namespace {

constexpr int kHandleTag = 0x4e455448;  // "NETH": net handles swapped at init
constexpr const char* kInternalSocket = "Socket";
constexpr const char* kInternalIb = "IB";

std::string probe(NetModule* m, std::vector<int>* devs) {
  ncclResult_t res = m->init();
  if (res != ncclSuccess) return "its init failed (error " + std::to_string(res) + ")";
  int ndev = 0;
  res = m->devices(&ndev);
  if (res != ncclSuccess) return "devices() failed (error " + std::to_string(res) + ")";
  if (ndev < 1) return "it reports no device";
  for (int d = 0; d < ndev; d++) {
    NetProps props;
    if (m->getProperties(d, &props) != ncclSuccess) continue;
    if (props.ptrSupport & kPtrHost) devs->push_back(d);
  }
  if (!devs->empty()) return "";
  return "none of its " + std::to_string(ndev) + " devices supports host memory (NCCL_PTR_HOST)";
}

// init() runs once per load of a library; its verdict stays with the loaded library.
const PluginVerdict& verdictOf(const LoadedNetPlugin& p) {
  NetModule* m = p.module;
  PluginVerdict& s = *p.verdict;
  if (!s.probed) {
    s.unusable = probe(m, &s.devs);
    s.probed = true;
    if (!s.unusable.empty())
      WARN("NET/Plugin: %s from %s is not used: %s", m->name(), m->origin().c_str(), s.unusable.c_str());
  }
  return s;
}

// The internal IB module, probed once per process (it is never unloaded). With no usable
// device one INFO line says why traffic goes elsewhere; *devs are its host-memory devices.
const std::string& ibVerdict(const std::vector<int>** devs) {
  static std::vector<int> ibDevs;
  static const std::string reason = [] {
    ib::IbNetModule* m = ib::processIbNetModule();
    std::string why;
    if (m->init() != ncclSuccess)
      why = "its init failed";
    else if (!m->whyNoDevice().empty())
      why = m->whyNoDevice();
    else
      why = probe(m, &ibDevs);
    if (!why.empty()) INFO(kSubsysInit | kSubsysNet, "NET/IB: %s; using Socket", why.c_str());
    return why;
  }();
  *devs = &ibDevs;
  return reason;
}

}  // namespace

NetCommState::~NetCommState() {
  worker.reset();
  if (module) module->closeContext(ctx);
  hold.reset();  // last: may unload the library whose code the lines above ran
}

// Of a module's host-memory devices, the one closest to the rank (by their pciPath or name).
int closestDevice(NetModule* m, const std::vector<int>& devs, const topo::RankLocality* where, std::string* why) {
  if (devs.size() == 1) return devs[0];
  const topo::HwTopology* hw = topo::processHwTopology();
  std::vector<topo::NicCandidate> nics;
  for (int d : devs) {
    NetProps props;
    m->getProperties(d, &props);
    nics.push_back({props.name, topo::busIdOfPciPath(props.pciPath)});
  }
  topo::NicPick pick = hw && where ? topo::chooseClosestNic(*hw, *where, nics)
                                   : topo::NicPick{0, "no topology: kept the first device"};
  *why = "device " + std::to_string(devs[pick.index]) + " of " + std::to_string(devs.size()) + ": " + pick.why;
  return devs[pick.index];
}

ncclResult_t chooseNetModule(const std::string& netName, const topo::RankLocality* where, NetChoice* choice) {
  std::string skipped, names;
  ncclResult_t failure = ncclSuccess;
  // Under the plugin table's lock: the chosen library gets a hold before anyone can unload it.
  NCCLCHECK(chooseNetPlugin(
      [&](const std::vector<LoadedNetPlugin>& plugins) {
        for (size_t i = 0; i < plugins.size(); i++) {
          NetModule* m = plugins[i].module;
          names += std::string(names.empty() ? "" : ", ") + m->name();
          if (!netName.empty() && strcasecmp(netName.c_str(), m->name()) != 0) {
            skipped += std::string(skipped.empty() ? "" : "; ") + m->name() + ": not NCCL_NET=" + netName;
            continue;
          }
          const PluginVerdict& s = verdictOf(plugins[i]);
          if (!s.unusable.empty()) {
            if (!netName.empty()) {
              WARN("NCCL_NET=%s: the net plugin %s (%s) cannot be used: %s", netName.c_str(), m->name(),
                   m->origin().c_str(), s.unusable.c_str());
              failure = ncclSystemError;
              return -1;
            }
            skipped += std::string(skipped.empty() ? "" : "; ") + m->name() + ": " + s.unusable;
            continue;
          }
          choice->module = m;
          std::string nicWhy;
          choice->dev = closestDevice(m, s.devs, where, &nicWhy);
          NetProps props;
          m->getProperties(choice->dev, &props);
          choice->why = std::string("net plugin ") + m->name() + " from " + m->origin() + ", device " +
                        std::to_string(choice->dev) + " (" + props.name + ", " + std::to_string(props.speedMbps) +
                        " Mbit/s)";
          if (!nicWhy.empty()) choice->why += "; NIC " + props.name + " is " + nicWhy;
          if (!skipped.empty()) choice->why += "; skipped " + skipped;
          return static_cast<int>(i);
        }
        return -1;
      },
      &choice->hold));
  if (failure != ncclSuccess) return failure;
  if (choice->module) return ncclSuccess;
  // The internal IB module comes next in NCCL's order, when it has a usable device.
  const bool wantIb = !netName.empty() && strcasecmp(netName.c_str(), kInternalIb) == 0;
  if (netName.empty() || wantIb) {
    const std::vector<int>* devs = nullptr;
    const std::string& ibWhyNot = ibVerdict(&devs);
    if (ibWhyNot.empty()) {
      NetModule* m = ib::processIbNetModule();
      std::string nicWhy;
      choice->module = m;
      choice->dev = closestDevice(m, *devs, where, &nicWhy);
      NetProps props;
      m->getProperties(choice->dev, &props);
      choice->why = "internal IB, device " + std::to_string(choice->dev) + " (" + props.name + ":" +
                    std::to_string(props.port) + ", " + std::to_string(props.speedMbps) + " Mbit/s)";
      if (!nicWhy.empty()) choice->why += "; NIC " + props.name + " is " + nicWhy;
      if (!skipped.empty()) choice->why += "; skipped " + skipped;
      return ncclSuccess;
    }
    if (wantIb) {
      WARN("NCCL_NET=IB cannot be used: %s", ibWhyNot.c_str());
      return ncclInvalidArgument;
    }
  }
  if (!netName.empty() && strcasecmp(netName.c_str(), kInternalSocket) != 0) {
    WARN("NCCL_NET=%s matches no usable network module; modules present: %s%s%s, %s", netName.c_str(), names.c_str(),
         names.empty() ? "" : ", ", kInternalIb, kInternalSocket);
    return ncclInvalidArgument;
  }
  choice->module = nullptr;
  choice->why = names.empty() ? std::string("internal Socket (no external net plugin loaded)")
                              : "internal Socket; skipped " + skipped;
  return ncclSuccess;
}

ncclResult_t connectNetPeers(const TransportSetup& c, NetChoice& choice, const std::vector<int>& peers,
                             std::unique_ptr<NetCommState>* out) {
  NetModule* m = choice.module;
  auto state = std::make_unique<NetCommState>();
  state->hold = std::move(choice.hold);
  NCCLCHECK(m->openContext(c.nonce, &state->ctx));
  state->module = m;
  state->worker = makeNetWorker(c.bell, c.rank, c.helperCpus ? *c.helperCpus : topo::CpuMask());

  struct Pending {
    char mine[kNetHandleBytes] = {};
    char theirs[kNetHandleBytes] = {};
    void* listenComm = nullptr;
    void* sendComm = nullptr;
    void* recvComm = nullptr;
  };
  std::map<int, Pending> pending;
  auto closeAll = [&] {
    for (auto& [p, e] : pending) {
      if (e.sendComm) m->closeSend(e.sendComm);
      if (e.recvComm) m->closeRecv(e.recvComm);
      if (e.listenComm) m->closeListen(e.listenComm);
    }
  };
  for (int p : peers) {
    Pending& e = pending[p];
    ncclResult_t res = m->listen(state->ctx, choice.dev, e.mine, &e.listenComm);
    if (res != ncclSuccess) {
      WARN("rank %d: net module %s: listen on device %d failed (error %d)", c.rank, m->name(), choice.dev, res);
      closeAll();
      return res;
    }
  }
  for (auto& [p, e] : pending) NCCLCHECK(c.bootstrap->send(p, kHandleTag, e.mine, kNetHandleBytes));
  for (auto& [p, e] : pending) NCCLCHECK(c.bootstrap->recv(p, kHandleTag, e.theirs, kNetHandleBytes));

  const int timeoutMs = static_cast<int>(2 * param::socketConnectTimeoutMsec() + 5000);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    bool all = true;
    std::string missing;
    for (auto& [p, e] : pending) {
      ncclResult_t res = ncclSuccess;
      if (!e.sendComm) res = m->connect(state->ctx, choice.dev, e.theirs, &e.sendComm);
      if (res == ncclSuccess && !e.recvComm) res = m->accept(e.listenComm, &e.recvComm);
      if (res != ncclSuccess) {
        WARN("rank %d: net module %s cannot connect with %s (error %d)", c.rank, m->name(),
             c.describePeer(p).c_str(), res);
        closeAll();
        return ncclRemoteError;
      }
      if (!e.sendComm || !e.recvComm) {
        all = false;
        missing += (missing.empty() ? "" : "; ") + c.describePeer(p);
      }
    }
    if (all) break;
    if (c.abortFlag->load()) {
      closeAll();
      return ncclInternalError;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      WARN("rank %d: net module %s: no connection with %s within %d ms", c.rank, m->name(), missing.c_str(),
           timeoutMs);
      closeAll();
      return ncclRemoteError;
    }
    std::this_thread::yield();
  }
  for (auto& [p, e] : pending) {
    m->closeListen(e.listenComm);
    e.listenComm = nullptr;
  }
  for (auto& [p, e] : pending) {
    std::unique_ptr<PeerConnection> conn;
    ncclResult_t res = makeNetConnection(state->worker, m, e.sendComm, e.recvComm, c.ringBytes, c.describePeer(p),
                                         &conn);
    e.sendComm = e.recvComm = nullptr;  // owned by the connection (or closed by it on failure)
    NCCLCHECK(res);
    (*c.conns)[p] = std::move(conn);
  }
  *out = std::move(state);
  return ncclSuccess;
}

}  // namespace accl::net
