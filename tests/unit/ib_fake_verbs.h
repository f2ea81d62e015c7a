// ib_fake_verbs.h: an in-process RDMA fabric behind the verbs seam, for protocol tests.
// Writes land in the peer's registered memory (bounds and rkey checked), a write with
// immediate consumes a posted receive on the peer QP (none posted = RNR error: an overrun),
// completions are queued on the CQs. breakQp() models a peer that died: its QP errors and
// every posted receive is flushed; writes towards it fail with a retry-exceeded status.
#pragma once
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>
#include "transports/ib/verbs_seam.h"

namespace accl::ib::fake {

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
  };
  std::map<uint64_t, Mr> mrs;
  std::map<uint32_t, Qp> qps;
  std::map<uint64_t, std::deque<WorkCompletion>> cqs;
  uint64_t nextId = 1;
  uint32_t nextQpn = 0x100;
  std::string failNextWrite;  // non-empty: the next write completes with this error status
  int rnrErrors = 0;

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
};

class Verbs final : public accl::ib::Verbs {
 public:
  Verbs(Fabric& f, PortInfo port, std::vector<GidEntry> gids) : f_(f), port_(port), gids_(std::move(gids)) {}
  ncclResult_t queryPort(PortInfo* out) override { *out = port_; return ncclSuccess; }
  ncclResult_t queryGids(std::vector<GidEntry>* out) override { *out = gids_; return ncclSuccess; }
  ncclResult_t allocPd(uint64_t* pd) override { *pd = f_.nextId++; return ncclSuccess; }
  ncclResult_t regMr(uint64_t, void* addr, size_t size, uint64_t* mr, MrKeys* keys) override {
    *mr = f_.nextId++;
    uint32_t key = static_cast<uint32_t>(*mr * 16 + 3);
    uintptr_t b = reinterpret_cast<uintptr_t>(addr);
    f_.mrs[*mr] = {b, b + size, key, true};
    *keys = {key, key};
    return ncclSuccess;
  }
  ncclResult_t deregMr(uint64_t mr) override {
    auto it = f_.mrs.find(mr);
    if (it == f_.mrs.end() || !it->second.live) return ncclInvalidArgument;
    it->second.live = false;
    return ncclSuccess;
  }
  ncclResult_t createCq(int, uint64_t* cq) override { *cq = f_.nextId++; f_.cqs[*cq]; return ncclSuccess; }
  ncclResult_t createQp(uint64_t, uint64_t cq, uint32_t* qpn) override {
    *qpn = f_.nextQpn++;
    f_.qps[*qpn].cq = cq;
    return ncclSuccess;
  }
  ncclResult_t modifyQp(uint32_t qpn, QpState s, const QpAttrs& a) override {
    Fabric::Qp& qp = f_.qps.at(qpn);
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
                         uint32_t rkey, bool withImm, uint32_t imm) override {
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
    if (qp.error || peer == f_.qps.end() || peer->second.error) return err("Transport Retry Counter Exceeded");
    if (len && !f_.findKey(lkey, reinterpret_cast<uintptr_t>(local), len)) return err("Local Protection Error");
    if (len && !f_.findKey(rkey, remote, len)) return err("Remote Access Error");
    if (withImm && peer->second.recvs.empty()) {
      f_.rnrErrors++;
      return err("RNR Retry Counter Exceeded");
    }
    if (len) std::memcpy(reinterpret_cast<void*>(remote), local, len);
    if (withImm) {
      uint64_t r = peer->second.recvs.front();
      peer->second.recvs.pop_front();
      f_.cqs[peer->second.cq].push_back({r, true, "", true, true, imm});
    }
    cq.push_back({wrId, true, "", false, false, 0});
    return ncclSuccess;
  }
  ncclResult_t postRecv(uint32_t qpn, uint64_t wrId) override {
    Fabric::Qp& qp = f_.qps.at(qpn);
    if (qp.error) f_.cqs[qp.cq].push_back({wrId, false, "Work Request Flushed Error", true, false, 0});
    else qp.recvs.push_back(wrId);
    return ncclSuccess;
  }
  ncclResult_t pollCq(uint64_t cq, std::vector<WorkCompletion>* out) override {
    auto& q = f_.cqs.at(cq);
    out->assign(q.begin(), q.end());
    q.clear();
    return ncclSuccess;
  }

 private:
  Fabric& f_;
  PortInfo port_;
  std::vector<GidEntry> gids_;
};

}  // namespace accl::ib::fake
