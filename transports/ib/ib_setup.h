// ib_setup.h: connection setup rules of the IB data path, kept free of I/O so they are unit
// tested: which GID to use (NCCL_IB_GID_INDEX, RoCE v2 preferred), what each side tells the
// other (QpInfo, packed into the ncclNet connect handle), the attributes of each QP
// transition (NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT), and the registration cache.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>
#include "transports/ib/verbs_seam.h"

namespace accl::ib {

struct IbConfig {
  int gidIndex = -1;   // NCCL_IB_GID_INDEX; -1: choose
  int roceVersion = 2; // NCCL_IB_ROCE_VERSION_NUM
  int qpsPerConn = 1;  // NCCL_IB_QPS_PER_CONNECTION
  int timeout = 20;    // NCCL_IB_TIMEOUT
  int retryCnt = 7;    // NCCL_IB_RETRY_CNT
  int rails = 4;       // ACCL_IB_RAILS: most ports one connection stripes over
  int railRetrySec = 10;  // ACCL_RAIL_RETRY_SEC: how often a failed port is asked again
  static IbConfig fromParams();
};

// The GID index to use on `port`, or -1 with *why set. InfiniBand: index 0 unless set.
// RoCE: the configured index if it exists, else the first GID of the configured RoCE version
// that holds an IPv4-mapped address, else the first of that version.
int selectGid(const std::vector<GidEntry>& gids, const PortInfo& port, const IbConfig& cfg, std::string* why);

inline constexpr int kMaxQpsPerConn = 8;

// What one side sends the other before its QPs can go to RTR.
struct QpInfo {
  uint16_t lid = 0;
  uint8_t global = 0;
  uint8_t nqps = 0;
  uint32_t psn = 0;
  Gid gid{};
  uint32_t qpn[kMaxQpsPerConn] = {};
  uint64_t fifoAddr = 0;  // sender: where the receiver writes credits
  uint32_t fifoRkey = 0;
  int32_t mtu = 0;
};
static_assert(sizeof(QpInfo) <= 128, "QpInfo must fit an ncclNet connect handle");
// Returns false (with *why) when `bytes` is not a well-formed QpInfo.
bool decodeQpInfo(const void* bytes, size_t len, QpInfo* out, std::string* why);
void encodeQpInfo(const QpInfo& info, void* bytes, size_t len);

QpAttrs rtrAttrs(const QpInfo& local, const QpInfo& remote, int qpIndex, int sgidIndex);
QpAttrs rtsAttrs(const QpInfo& local, const IbConfig& cfg);

// regMr of a range already covered by a cached MR reuses it; deregistration is by refcount.
class MrCache {
 public:
  MrCache(Verbs& verbs, uint64_t pd) : verbs_(verbs), pd_(pd) {}
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;
  ncclResult_t reg(void* addr, size_t size, MrKeys* keys, uint64_t* handle);
  ncclResult_t dereg(uint64_t handle);
  size_t liveRegistrations() const { return entries_.size(); }

 private:
  struct Entry {
    uintptr_t begin, end;
    uint64_t mr;
    MrKeys keys;
    int refs;
  };
  Verbs& verbs_;
  uint64_t pd_;
  std::map<uint64_t, Entry> entries_;  // by MR handle
};

}  // namespace accl::ib
