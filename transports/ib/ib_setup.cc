// ib_setup.cc: GID choice, the connect-handle record, QP transition attributes, MR cache.
#include "transports/ib/ib_setup.h"
#include <cstring>
#include "base/param.h"

namespace accl::ib {
namespace {

bool ipv4Mapped(const Gid& g) {
  for (int i = 0; i < 10; i++)
    if (g[i] != 0) return false;
  return g[10] == 0xff && g[11] == 0xff;
}

}  // namespace

IbConfig IbConfig::fromParams() {
  IbConfig c;
  c.gidIndex = static_cast<int>(param::ibGidIndex());
  c.roceVersion = static_cast<int>(param::ibRoceVersionNum());
  c.qpsPerConn = static_cast<int>(param::ibQpsPerConnection());
  c.timeout = static_cast<int>(param::ibTimeout());
  c.retryCnt = static_cast<int>(param::ibRetryCnt());
  c.rails = static_cast<int>(param::ibRails());
  c.railRetrySec = static_cast<int>(param::railRetrySec());
  return c;
}

int selectGid(const std::vector<GidEntry>& gids, const PortInfo& port, const IbConfig& cfg, std::string* why) {
  if (cfg.gidIndex >= 0) {
    for (const GidEntry& g : gids)
      if (g.index == cfg.gidIndex) return g.index;
    *why = "NCCL_IB_GID_INDEX=" + std::to_string(cfg.gidIndex) + " is not in the port's GID table";
    return -1;
  }
  if (!port.ethernet) return gids.empty() ? 0 : gids.front().index;
  GidType want = cfg.roceVersion == 1 ? GidType::IbOrRoceV1 : GidType::RoceV2;
  int firstOfType = -1;
  for (const GidEntry& g : gids) {
    if (g.type != want) continue;
    if (ipv4Mapped(g.gid)) return g.index;
    if (firstOfType < 0) firstOfType = g.index;
  }
  if (firstOfType < 0) *why = "no RoCE v" + std::to_string(cfg.roceVersion) + " GID on this port (NCCL_IB_ROCE_VERSION_NUM)";
  return firstOfType;
}

bool decodeQpInfo(const void* bytes, size_t len, QpInfo* out, std::string* why) {
  if (len < sizeof(QpInfo)) {
    *why = "connect handle too short for IB QP info";
    return false;
  }
  std::memcpy(out, bytes, sizeof(QpInfo));
  if (out->nqps < 1 || out->nqps > kMaxQpsPerConn) {
    *why = "IB QP info holds " + std::to_string(out->nqps) + " QPs (1.." + std::to_string(kMaxQpsPerConn) + " allowed)";
    return false;
  }
  return true;
}

void encodeQpInfo(const QpInfo& info, void* bytes, size_t len) {
  std::memset(bytes, 0, len);
  std::memcpy(bytes, &info, sizeof(QpInfo) < len ? sizeof(QpInfo) : len);
}

QpAttrs rtrAttrs(const QpInfo& local, const QpInfo& remote, int qpIndex, int sgidIndex) {
  QpAttrs a;
  a.remoteQpn = remote.qpn[qpIndex];
  a.remotePsn = remote.psn;
  a.dlid = remote.lid;
  a.global = remote.global != 0 || local.global != 0;
  a.dgid = remote.gid;
  a.sgidIndex = sgidIndex;
  a.mtu = local.mtu < remote.mtu ? local.mtu : remote.mtu;
  return a;
}

QpAttrs rtsAttrs(const QpInfo& local, const IbConfig& cfg) {
  QpAttrs a;
  a.localPsn = local.psn;
  a.timeout = static_cast<uint8_t>(cfg.timeout);
  a.retryCnt = static_cast<uint8_t>(cfg.retryCnt);
  a.rnrRetry = 7;
  return a;
}

MrCache::~MrCache() {
  for (auto& [mr, e] : entries_) verbs_.deregMr(mr);
}

ncclResult_t MrCache::reg(void* addr, size_t size, MrKeys* keys, uint64_t* handle) {
  uintptr_t b = reinterpret_cast<uintptr_t>(addr), e = b + size;
  for (auto& [mr, entry] : entries_) {
    if (entry.begin <= b && e <= entry.end) {
      entry.refs++;
      *keys = entry.keys;
      *handle = mr;
      return ncclSuccess;
    }
  }
  uint64_t mr = 0;
  MrKeys k;
  ncclResult_t r = verbs_.regMr(pd_, addr, size, &mr, &k);
  if (r != ncclSuccess) return r;
  entries_[mr] = Entry{b, e, mr, k, 1};
  *keys = k;
  *handle = mr;
  return ncclSuccess;
}

ncclResult_t MrCache::dereg(uint64_t handle) {
  auto it = entries_.find(handle);
  if (it == entries_.end()) return ncclInvalidArgument;
  if (--it->second.refs > 0) return ncclSuccess;
  ncclResult_t r = verbs_.deregMr(handle);
  entries_.erase(it);
  return r;
}

}  // namespace accl::ib
