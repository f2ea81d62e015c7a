// ib_fake_verbs.h: an in-process RDMA fabric behind the verbs seam, for protocol tests.
// Writes land in the peer's registered memory (bounds and rkey checked), a write with
// immediate consumes a posted receive on the peer QP (none posted = RNR error: an overrun),
// completions are queued on the CQs. breakQp() models a peer that died: its QP errors and
// every posted receive is flushed; writes towards it fail with a retry-exceeded status;
// breakPort() does that to every QP made on one port of a host and marks the port down
// (queryPort says so, writes from or to it fail) until portUp(). As on a real device, a QP in
// the error state only goes to Reset (or Error) and from Reset up again via INIT -> RTR -> RTS;
// Reset drops its posted receives without completions, and receives cannot be posted in Reset.
// Host is one machine of the fabric as the IB net module sees it (its ports; a verbs context
// per open). The fabric is locked per call, so ranks in threads may share it.
#pragma once
#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include "transports/ib/ib_devices.h"
#include "transports/ib/verbs_seam.h"

#if defined(__SANITIZE_THREAD__)
#define ACCL_FAKE_DMA_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ACCL_FAKE_DMA_UNDER_TSAN 1
#endif
#endif
#ifdef ACCL_FAKE_DMA_UNDER_TSAN
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace accl::ib::fake {

// What a NIC's DMA does to the peer's registered memory. The race detector tracks CPU
// threads, and a NIC is not one: the protocol reads that memory as a NIC leaves it (the
// credit words change underneath the sender, read through volatile), so the fake's copy,
// made on whichever thread posted the write, is kept out of the detector's view.
inline void dmaWrite(void* dst, const void* src, size_t len) {
#ifdef ACCL_FAKE_DMA_UNDER_TSAN
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
  std::memcpy(dst, src, len);
#ifdef ACCL_FAKE_DMA_UNDER_TSAN
  AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#endif
}

struct Fabric {
  struct Mr { uintptr_t begin, end; uint32_t key; bool live; };
  struct Qp {
    uint64_t cq = 0;
    uint32_t remote = 0;
    bool hasState = false;
    QpState state = QpState::Init;
    bool error = false;
    std::vector<std::pair<QpState, QpAttrs>> transitions;
    std::deque<uint64_t> recvs;
    int host = 0;
    std::string port;  // "mlx5_1:1": the port of the verbs context that made it
  };
  std::recursive_mutex mu;
  std::map<uint64_t, Mr> mrs;
  std::map<uint32_t, Qp> qps;
  std::map<uint64_t, std::deque<WorkCompletion>> cqs;
  uint64_t nextId = 1;
  uint32_t nextQpn = 0x100;
  std::string failNextWrite;  // non-empty: the next write completes with this error status
  int rnrErrors = 0;
  uint64_t bytesWritten = 0;  // payload of writes with immediate (messages, not credits)
  std::map<std::pair<int, std::string>, uint64_t> bytesByPort;  // the same, by writer's (host, port)
  std::set<std::pair<int, std::string>> downPorts;               // (host, port) until portUp()
  // One-shot: runs inside the next write with immediate, once it has landed and before
  // postWrite returns (the peer acting while the writer is still in its post call).
  std::function<void()> onDelivery;

  const Mr* findKey(uint32_t key, uintptr_t b, size_t len) const {
    for (const auto& [id, mr] : mrs)
      if (mr.live && mr.key == key && mr.begin <= b && b + len <= mr.end) return &mr;
    return nullptr;
  }
  void breakQp(uint32_t qpn) {
    Qp& qp = qps.at(qpn);
    qp.error = true;
    for (uint64_t wr : qp.recvs) cqs[qp.cq].push_back({wr, false, "Work Request Flushed Error", true, false, 0});
    qp.recvs.clear();
  }
  // The host's process died: every QP it had errors.
  void breakHost(int host) {
    std::lock_guard<std::recursive_mutex> lk(mu);
    for (auto& [qpn, qp] : qps)
      if (qp.host == host) breakQp(qpn);
  }
  // A port of a host went down: every QP on it goes to the error state.
  void breakPort(int host, const std::string& port) {
    std::lock_guard<std::recursive_mutex> lk(mu);
    downPorts.insert({host, port});
    for (auto& [qpn, qp] : qps)
      if (qp.host == host && qp.port == port) breakQp(qpn);
  }
  // The port is active again; its QPs stay in the error state until reset.
  void portUp(int host, const std::string& port) {
    std::lock_guard<std::recursive_mutex> lk(mu);
    downPorts.erase({host, port});
  }
  bool isDown(int host, const std::string& port) {
    std::lock_guard<std::recursive_mutex> lk(mu);
    return downPorts.count({host, port}) != 0;
  }
  size_t qpsOf(int host) {
    std::lock_guard<std::recursive_mutex> lk(mu);
    size_t n = 0;
    for (auto& [qpn, qp] : qps) n += qp.host == host;
    return n;
  }
};

class Verbs final : public accl::ib::Verbs {
 public:
  Verbs(Fabric& f, PortInfo port, std::vector<GidEntry> gids, int host = 0, std::string portName = "")
      : f_(f), port_(port), gids_(std::move(gids)), host_(host), portName_(std::move(portName)) {}
  ncclResult_t queryPort(PortInfo* out) override { std::lock_guard<std::recursive_mutex> lk(f_.mu);
    *out = port_;
    out->active = !f_.isDown(host_, portName_);
    return ncclSuccess;
  }
  ncclResult_t queryGids(std::vector<GidEntry>* out) override { std::lock_guard<std::recursive_mutex> lk(f_.mu); *out = gids_; return ncclSuccess; }
  ncclResult_t allocPd(uint64_t* pd) override { std::lock_guard<std::recursive_mutex> lk(f_.mu); *pd = f_.nextId++; return ncclSuccess; }
  ncclResult_t regMr(uint64_t, void* addr, size_t size, uint64_t* mr, MrKeys* keys) override { std::lock_guard<std::recursive_mutex> lk(f_.mu);
    *mr = f_.nextId++;
    uint32_t key = static_cast<uint32_t>(*mr * 16 + 3);
    uintptr_t b = reinterpret_cast<uintptr_t>(addr);
    f_.mrs[*mr] = {b, b + size, key, true};
    *keys = {key, key};
    return ncclSuccess;
  }
  ncclResult_t deregMr(uint64_t mr) override { std::lock_guard<std::recursive_mutex> lk(f_.mu);
    auto it = f_.mrs.find(mr);
    if (it == f_.mrs.end() || !it->second.live) return ncclInvalidArgument;
    it->second.live = false;
    return ncclSuccess;
  }
  ncclResult_t createCq(int, uint64_t* cq) override { std::lock_guard<std::recursive_mutex> lk(f_.mu); *cq = f_.nextId++; f_.cqs[*cq]; return ncclSuccess; }
  ncclResult_t createQp(uint64_t, uint64_t cq, uint32_t* qpn) override { std::lock_guard<std::recursive_mutex> lk(f_.mu);
    *qpn = f_.nextQpn++;
    f_.qps[*qpn].cq = cq;
    f_.qps[*qpn].host = host_;
    f_.qps[*qpn].port = portName_;
    return ncclSuccess;
  }
  ncclResult_t modifyQp(uint32_t qpn, QpState s, const QpAttrs& a) override { std::lock_guard<std::recursive_mutex> lk(f_.mu);
    Fabric::Qp& qp = f_.qps.at(qpn);
    if (s == QpState::Reset) {
      qp.hasState = false;
      qp.error = false;
      qp.recvs.clear();
      qp.transitions.push_back({s, a});
      return ncclSuccess;
    }
    if (s == QpState::Error) {
      f_.breakQp(qpn);
      qp.transitions.push_back({s, a});
      return ncclSuccess;
    }
    if (qp.error) return ncclSystemError;  // only Reset leaves the error state
    // Transitions must go INIT -> RTR -> RTS, as on a real device.
    bool ok = s == QpState::Init ? !qp.hasState
              : s == QpState::Rtr ? qp.hasState && qp.state == QpState::Init
                                  : qp.hasState && qp.state == QpState::Rtr;
    if (!ok) return ncclSystemError;
    qp.hasState = true;
    qp.state = s;
    if (s == QpState::Rtr) qp.remote = a.remoteQpn;
    qp.transitions.push_back({s, a});
    return ncclSuccess;
  }
  ncclResult_t postWrite(uint32_t qpn, uint64_t wrId, const void* local, uint32_t lkey, size_t len, uint64_t remote,
                         uint32_t rkey, bool withImm, uint32_t imm) override { std::lock_guard<std::recursive_mutex> lk(f_.mu);
    Fabric::Qp& qp = f_.qps.at(qpn);
    if (!qp.hasState || qp.state != QpState::Rts) return ncclSystemError;
    auto& cq = f_.cqs[qp.cq];
    auto err = [&](const char* status) { cq.push_back({wrId, false, status, false, false, 0}); return ncclSuccess; };
    if (!f_.failNextWrite.empty()) {
      std::string s = f_.failNextWrite;
      f_.failNextWrite.clear();
      cq.push_back({wrId, false, s, false, false, 0});
      return ncclSuccess;
    }
    auto peer = f_.qps.find(qp.remote);
    if (!qp.error && (f_.isDown(qp.host, qp.port) ||
                      (peer != f_.qps.end() && f_.isDown(peer->second.host, peer->second.port))))
      f_.breakQp(qpn);  // no path: the QP gives up after its retries
    if (qp.error || peer == f_.qps.end() || peer->second.error) return err("Transport Retry Counter Exceeded");
    if (len && !f_.findKey(lkey, reinterpret_cast<uintptr_t>(local), len)) return err("Local Protection Error");
    if (len && !f_.findKey(rkey, remote, len)) return err("Remote Access Error");
    if (withImm && peer->second.recvs.empty()) {
      f_.rnrErrors++;
      return err("RNR Retry Counter Exceeded");
    }
    if (len) dmaWrite(reinterpret_cast<void*>(remote), local, len);
    if (withImm) {
      f_.bytesWritten += len;
      f_.bytesByPort[{qp.host, qp.port}] += len;
      uint64_t r = peer->second.recvs.front();
      peer->second.recvs.pop_front();
      f_.cqs[peer->second.cq].push_back({r, true, "", true, true, imm});
    }
    cq.push_back({wrId, true, "", false, false, 0});
    if (withImm && f_.onDelivery) std::exchange(f_.onDelivery, nullptr)();
    return ncclSuccess;
  }
  ncclResult_t postRecv(uint32_t qpn, uint64_t wrId) override { std::lock_guard<std::recursive_mutex> lk(f_.mu);
    Fabric::Qp& qp = f_.qps.at(qpn);
    if (!qp.hasState) return ncclSystemError;  // in Reset
    if (qp.error) f_.cqs[qp.cq].push_back({wrId, false, "Work Request Flushed Error", true, false, 0});
    else qp.recvs.push_back(wrId);
    return ncclSuccess;
  }
  ncclResult_t pollCq(uint64_t cq, std::vector<WorkCompletion>* out) override { std::lock_guard<std::recursive_mutex> lk(f_.mu);
    auto& q = f_.cqs.at(cq);
    out->assign(q.begin(), q.end());
    q.clear();
    return ncclSuccess;
  }

 private:
  Fabric& f_;
  PortInfo port_;
  std::vector<GidEntry> gids_;
  int host_;
  std::string portName_;
};

class Host final : public VerbsApi {
 public:
  Host(Fabric& f, int id, std::vector<IbPort> ports, PortInfo port, std::vector<GidEntry> gids)
      : f_(f), id_(id), ports_(std::move(ports)), port_(port), gids_(std::move(gids)) {}
  ncclResult_t listPorts(std::vector<IbPort>* out, std::string* why) override {
    *out = ports_;
    if (ports_.empty()) *why = "no RDMA device (fake host without ports)";
    return ncclSuccess;
  }
  std::unique_ptr<accl::ib::Verbs> open(const IbPort& p, std::string*) override {
    opened++;
    return std::make_unique<Verbs>(f_, port_, gids_, id_, p.device + ":" + std::to_string(p.port));
  }
  std::atomic<int> opened{0};

 private:
  Fabric& f_;
  int id_;
  std::vector<IbPort> ports_;
  PortInfo port_;
  std::vector<GidEntry> gids_;
};

// Host 1 with active RoCE v2 ports of these names (100 Gbit/s, port state as PortInfo{0,
// true, 4096}, one IPv4-mapped GID at index 3): what the collective tests install with
// setIbVerbsForTesting before the process's IB module is made.
inline std::shared_ptr<Host> roceHost(Fabric& fabric, const std::vector<std::string>& devices) {
  std::vector<IbPort> ports;
  for (const std::string& name : devices) {
    IbPort port;
    port.device = name;
    port.active = true;
    port.ethernet = true;
    port.speedMbps = 100000;
    ports.push_back(port);
  }
  Gid gid{};
  gid[10] = gid[11] = 0xff;
  gid[15] = 1;
  return std::make_shared<Host>(fabric, 1, ports, PortInfo{0, true, 4096},
                                std::vector<GidEntry>{{3, gid, GidType::RoceV2}});
}

}  // namespace accl::ib::fake
