// ib_channel.cc: QP bring-up and the credit / write-with-immediate protocol.
#include "transports/ib/ib_channel.h"
#include <cstring>
#include "base/log.h"

namespace accl::ib {
namespace {

constexpr uint64_t kCreditWr = 1ull << 32;  // wrId bit: the receiver's credit write

// No log here: the error is kept in error() and the owner decides how loud it is (a peer
// that destroyed its communicator first leaves error completions behind that matter to nobody).
ncclResult_t fail(std::string* error, const std::string& peer, const WorkCompletion& wc) {
  if (error->empty()) *error = "IB completion error with peer " + peer + ": " + wc.status;
  return ncclRemoteError;
}

}  // namespace

ncclResult_t IbQpSet::create(uint32_t psn, QpInfo* local) {
  if (cfg_.qpsPerConn < 1 || cfg_.qpsPerConn > kMaxQpsPerConn) {
    WARN("NCCL_IB_QPS_PER_CONNECTION=%d is outside 1..%d", cfg_.qpsPerConn, kMaxQpsPerConn);
    return ncclInvalidArgument;
  }
  PortInfo port;
  std::vector<GidEntry> gids;
  if (verbs_.queryPort(&port) != ncclSuccess || verbs_.queryGids(&gids) != ncclSuccess) return ncclSystemError;
  std::string why;
  sgid_ = selectGid(gids, port, cfg_, &why);
  if (sgid_ < 0) {
    WARN("IB: no usable GID for peer %s: %s", peer_.c_str(), why.c_str());
    return ncclInvalidArgument;
  }
  if (verbs_.allocPd(&pd_) != ncclSuccess) return ncclSystemError;
  if (verbs_.createCq(kIbMaxInflight * (kMaxQpsPerConn + 2) * 2, &cq_) != ncclSuccess) return ncclSystemError;
  *local = QpInfo{};
  for (int i = 0; i < cfg_.qpsPerConn; i++) {
    uint32_t qpn = 0;
    if (verbs_.createQp(pd_, cq_, &qpn) != ncclSuccess) return ncclSystemError;
    qpns_.push_back(qpn);
    local->qpn[i] = qpn;
  }
  local->nqps = static_cast<uint8_t>(cfg_.qpsPerConn);
  local->psn = psn;
  local->lid = port.lid;
  local->global = port.ethernet ? 1 : 0;
  local->mtu = port.mtu;
  for (const GidEntry& g : gids)
    if (g.index == sgid_) local->gid = g.gid;
  return ncclSuccess;
}

ncclResult_t IbQpSet::connect(const QpInfo& local, const QpInfo& remote) {
  if (remote.nqps != local.nqps) {
    WARN("IB: peer %s has %d QPs per connection, this rank %d (NCCL_IB_QPS_PER_CONNECTION must agree)",
         peer_.c_str(), remote.nqps, local.nqps);
    return ncclInvalidUsage;
  }
  for (size_t i = 0; i < qpns_.size(); i++) {
    if (verbs_.modifyQp(qpns_[i], QpState::Init, QpAttrs{}) != ncclSuccess ||
        verbs_.modifyQp(qpns_[i], QpState::Rtr, rtrAttrs(local, remote, static_cast<int>(i), sgid_)) != ncclSuccess ||
        verbs_.modifyQp(qpns_[i], QpState::Rts, rtsAttrs(local, cfg_)) != ncclSuccess) {
      WARN("IB: bringing QP %u to RTS towards peer %s failed", qpns_[i], peer_.c_str());
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

ncclResult_t IbQpSet::moveAll(QpState state, const QpInfo& local, const QpInfo& remote) {
  for (size_t i = 0; i < qpns_.size(); i++) {
    const QpAttrs attrs = state == QpState::Rtr   ? rtrAttrs(local, remote, static_cast<int>(i), sgid_)
                          : state == QpState::Rts ? rtsAttrs(local, cfg_)
                                                  : QpAttrs{};
    if (verbs_.modifyQp(qpns_[i], state, attrs) != ncclSuccess) return ncclSystemError;
  }
  return ncclSuccess;
}

IbSender::~IbSender() {
  if (fifoMr_) qps_.verbs().deregMr(fifoMr_);
}

ncclResult_t IbSender::init(QpInfo* local) {
  fifo_ = std::make_unique<IbCredit[]>(kIbMaxInflight);
  MrKeys keys;
  if (qps_.verbs().regMr(qps_.pd(), fifo_.get(), sizeof(IbCredit) * kIbMaxInflight, &fifoMr_, &keys) != ncclSuccess)
    return ncclSystemError;
  local->fifoAddr = reinterpret_cast<uintptr_t>(fifo_.get());
  local->fifoRkey = keys.rkey;
  return ncclSuccess;
}

ncclResult_t IbSender::progress() {
  std::vector<WorkCompletion> wcs;
  if (qps_.verbs().pollCq(qps_.cq(), &wcs) != ncclSuccess) return ncclSystemError;
  for (const WorkCompletion& wc : wcs) {
    if (!wc.ok) return fail(&error_, qps_.peer(), wc);
    slots_[wc.wrId % kIbMaxInflight].pending--;
  }
  return error_.empty() ? ncclSuccess : ncclRemoteError;
}

ncclResult_t IbSender::isend(const void* data, size_t size, uint32_t lkey, int64_t* req) {
  *req = -1;
  if (ncclResult_t r = progress(); r != ncclSuccess) return r;
  uint64_t seq = next_;
  Slot& slot = slots_[seq % kIbMaxInflight];
  // The credit is written by the peer's NIC: read it as memory that changes underneath us.
  volatile IbCredit* credit = &fifo_[seq % kIbMaxInflight];
  if (credit->seq != seq + 1 || slot.pending > 0) return ncclSuccess;  // no buffer posted yet
  if (size > credit->size) {
    WARN("IB: message of %zu bytes to peer %s exceeds its posted receive of %llu bytes", size,
         qps_.peer().c_str(), static_cast<unsigned long long>(credit->size));
    return ncclInvalidUsage;
  }
  // Take the credit before writing: once the message lands the receiver may post the next
  // credit into this same FIFO slot, even before postWrite returns, and it must survive.
  const uint64_t remote = credit->addr;
  const uint32_t rkey = credit->rkey;
  credit->seq = 0;
  const std::vector<uint32_t>& qpns = qps_.qpns();
  size_t nq = qpns.size(), chunk = (size + nq - 1) / nq;
  slot = Slot{seq, static_cast<int>(nq), size};
  for (size_t q = 0; q < nq; q++) {
    size_t off = q * chunk < size ? q * chunk : size;
    size_t len = size - off < chunk ? size - off : chunk;
    if (qps_.verbs().postWrite(qpns[q], seq, static_cast<const char*>(data) + off, lkey, len, remote + off, rkey,
                               true, static_cast<uint32_t>(len)) != ncclSuccess) {
      WARN("IB: posting a write to peer %s failed", qps_.peer().c_str());
      return ncclSystemError;
    }
  }
  next_++;
  *req = static_cast<int64_t>(seq);
  return ncclSuccess;
}

ncclResult_t IbSender::test(int64_t req, bool* done, size_t* size) {
  *done = false;
  if (ncclResult_t r = progress(); r != ncclSuccess) return r;
  const Slot& slot = slots_[req % kIbMaxInflight];
  if (slot.seq == static_cast<uint64_t>(req) && slot.pending == 0) {
    *done = true;
    if (size) *size = slot.size;
  }
  return ncclSuccess;
}

IbReceiver::~IbReceiver() {
  if (stagingMr_) qps_.verbs().deregMr(stagingMr_);
}

ncclResult_t IbReceiver::init(const QpInfo& remote) {
  fifoAddr_ = remote.fifoAddr;
  fifoRkey_ = remote.fifoRkey;
  staging_ = std::make_unique<IbCredit[]>(kIbMaxInflight);
  MrKeys keys;
  if (qps_.verbs().regMr(qps_.pd(), staging_.get(), sizeof(IbCredit) * kIbMaxInflight, &stagingMr_, &keys) !=
      ncclSuccess)
    return ncclSystemError;
  stagingLkey_ = keys.lkey;
  return ncclSuccess;
}

ncclResult_t IbReceiver::progress() {
  std::vector<WorkCompletion> wcs;
  if (qps_.verbs().pollCq(qps_.cq(), &wcs) != ncclSuccess) return ncclSystemError;
  for (const WorkCompletion& wc : wcs) {
    if (!wc.ok) return fail(&error_, qps_.peer(), wc);
    Slot& slot = slots_[(wc.wrId & ~kCreditWr) % kIbMaxInflight];
    if (wc.isRecv && wc.hasImm) slot.bytes += wc.imm;
    slot.pending--;
  }
  return error_.empty() ? ncclSuccess : ncclRemoteError;
}

ncclResult_t IbReceiver::irecv(void* data, size_t size, uint32_t rkey, int64_t* req) {
  *req = -1;
  if (ncclResult_t r = progress(); r != ncclSuccess) return r;
  uint64_t seq = next_;
  Slot& slot = slots_[seq % kIbMaxInflight];
  if (slot.pending > 0) return ncclSuccess;  // kIbMaxInflight receives outstanding
  const std::vector<uint32_t>& qpns = qps_.qpns();
  // Receives first: the sender may write as soon as the credit lands.
  for (uint32_t qpn : qpns)
    if (qps_.verbs().postRecv(qpn, seq) != ncclSuccess) return ncclSystemError;
  slot = Slot{seq, static_cast<int>(qpns.size()) + 1, 0};
  IbCredit& c = staging_[seq % kIbMaxInflight];
  c = IbCredit{reinterpret_cast<uintptr_t>(data), size, rkey, 0, seq + 1};
  if (qps_.verbs().postWrite(qpns[0], kCreditWr | seq, &c, stagingLkey_, sizeof c,
                             fifoAddr_ + (seq % kIbMaxInflight) * sizeof(IbCredit), fifoRkey_, false, 0) != ncclSuccess) {
    WARN("IB: posting a credit to peer %s failed", qps_.peer().c_str());
    return ncclSystemError;
  }
  next_++;
  *req = static_cast<int64_t>(seq);
  return ncclSuccess;
}

ncclResult_t IbReceiver::test(int64_t req, bool* done, size_t* size) {
  *done = false;
  if (ncclResult_t r = progress(); r != ncclSuccess) return r;
  const Slot& slot = slots_[req % kIbMaxInflight];
  if (slot.seq == static_cast<uint64_t>(req) && slot.pending == 0) {
    *done = true;
    if (size) *size = slot.bytes;
  }
  return ncclSuccess;
}

}  // namespace accl::ib
