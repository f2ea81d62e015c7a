// Config protocol (see spec/nccl-api.md §4): copy min(size, ours) bytes over an undefined
// template, reject a bad magic, distrust fields newer than the caller's header version,
// validate, fill defaults, then let the environment override.
#include "comm/config.h"
#include <cstdlib>
#include <cstring>
#include "base/log.h"
#include "base/param.h"

namespace accl {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;
constexpr int kUndef = NCCL_CONFIG_UNDEF_INT;
constexpr int kMaxChannels = 64;

void distrustNewerFields(ncclConfig_t* c) {
  unsigned v = c->version;
  if (v < NCCL_VERSION(2, 14, 0)) c->blocking = kUndef;
  if (v < NCCL_VERSION(2, 17, 0)) {
    c->cgaClusterSize = kUndef;
    c->minCTAs = kUndef;
    c->maxCTAs = kUndef;
    c->netName = nullptr;
  }
  if (v < NCCL_VERSION(2, 25, 0)) c->trafficClass = kUndef;
  if (v < NCCL_VERSION(2, 27, 0)) {
    c->collnetEnable = kUndef;
    c->CTAPolicy = kUndef;
    c->shrinkShare = kUndef;
    c->nvlsCTAs = kUndef;
  }
  if (v < NCCL_VERSION(2, 28, 0)) {
    c->nChannelsPerNetPeer = kUndef;
    c->nvlinkCentricSched = kUndef;
  }
}

ncclResult_t checkBool(const char* field, int v) {
  if (v != kUndef && v != 0 && v != 1) {
    WARN("ncclConfig_t.%s = %d is invalid (expected 0 or 1)", field, v);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t validate(const ncclConfig_t& c) {
  if (checkBool("blocking", c.blocking) != ncclSuccess) return ncclInvalidArgument;
  if (checkBool("splitShare", c.splitShare) != ncclSuccess) return ncclInvalidArgument;
  if (checkBool("collnetEnable", c.collnetEnable) != ncclSuccess) return ncclInvalidArgument;
  if (checkBool("shrinkShare", c.shrinkShare) != ncclSuccess) return ncclInvalidArgument;
  if (checkBool("nvlinkCentricSched", c.nvlinkCentricSched) != ncclSuccess) return ncclInvalidArgument;
  if (c.cgaClusterSize != kUndef && c.cgaClusterSize < 0) {
    WARN("ncclConfig_t.cgaClusterSize = %d is invalid (must be >= 0)", c.cgaClusterSize);
    return ncclInvalidArgument;
  }
  if (c.minCTAs != kUndef && c.minCTAs <= 0) {
    WARN("ncclConfig_t.minCTAs = %d is invalid (must be > 0)", c.minCTAs);
    return ncclInvalidArgument;
  }
  if (c.maxCTAs != kUndef && c.maxCTAs <= 0) {
    WARN("ncclConfig_t.maxCTAs = %d is invalid (must be > 0)", c.maxCTAs);
    return ncclInvalidArgument;
  }
  if (c.minCTAs != kUndef && c.maxCTAs != kUndef && c.minCTAs > c.maxCTAs) {
    WARN("ncclConfig_t.minCTAs = %d exceeds maxCTAs = %d", c.minCTAs, c.maxCTAs);
    return ncclInvalidArgument;
  }
  if (c.CTAPolicy != kUndef && (c.CTAPolicy < 0 || c.CTAPolicy > NCCL_CTA_POLICY_ZERO)) {
    WARN("ncclConfig_t.CTAPolicy = %d is invalid (expected 0..2)", c.CTAPolicy);
    return ncclInvalidArgument;
  }
  if (c.nvlsCTAs != kUndef && c.nvlsCTAs <= 0) {
    WARN("ncclConfig_t.nvlsCTAs = %d is invalid (must be > 0)", c.nvlsCTAs);
    return ncclInvalidArgument;
  }
  if (c.nChannelsPerNetPeer != kUndef && (c.nChannelsPerNetPeer < 1 || c.nChannelsPerNetPeer > kMaxChannels)) {
    WARN("ncclConfig_t.nChannelsPerNetPeer = %d is invalid (expected 1..%d)", c.nChannelsPerNetPeer, kMaxChannels);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

int pick(int v, int def) { return v == kUndef ? def : v; }

// Environment overrides of config fields (env wins); unset or out-of-range values are ignored.
void overrideInt(int64_t v, int* field, int lo, int hi) {
  if (v < lo || v > hi) return;
  *field = static_cast<int>(v);
}

}  // namespace

ncclResult_t parseConfig(const ncclConfig_t* user, const Config* inherit, Config* out) {
  if (user == nullptr && inherit != nullptr) {
    *out = *inherit;
    return ncclSuccess;
  }
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  if (user != nullptr) {
    size_t callerSize = user->size;
    if (user->magic != kConfigMagic) {
      WARN("ncclConfig_t at %p has magic 0x%x, not 0xcafebeef: initialize it with NCCL_CONFIG_INITIALIZER",
           static_cast<const void*>(user), user->magic);
      return ncclInvalidArgument;
    }
    if (callerSize < offsetof(ncclConfig_t, blocking)) {
      WARN("ncclConfig_t.size = %zu is too small to be a config", callerSize);
      return ncclInvalidArgument;
    }
    std::memcpy(&c, user, callerSize < sizeof(c) ? callerSize : sizeof(c));
    distrustNewerFields(&c);
  }
  if (validate(c) != ncclSuccess) return ncclInvalidArgument;

  Config r;
  r.blocking = pick(c.blocking, 1);
  r.cgaClusterSize = pick(c.cgaClusterSize, 4);
  if (r.cgaClusterSize > 8) r.cgaClusterSize = 8;
  r.minCTAs = pick(c.minCTAs, 1);
  r.maxCTAs = pick(c.maxCTAs, kMaxChannels);
  r.netName = c.netName ? c.netName : "";
  r.splitShare = pick(c.splitShare, 0);
  r.trafficClass = c.trafficClass;
  r.commName = c.commName ? c.commName : "";
  r.collnetEnable = pick(c.collnetEnable, 0);
  r.ctaPolicy = pick(c.CTAPolicy, NCCL_CTA_POLICY_DEFAULT);
  r.shrinkShare = pick(c.shrinkShare, 0);
  r.nvlsCTAs = c.nvlsCTAs;
  r.nChannelsPerNetPeer = c.nChannelsPerNetPeer;
  r.nvlinkCentricSched = pick(c.nvlinkCentricSched, 0);

  overrideInt(param::commBlocking(), &r.blocking, 0, 1);
  overrideInt(param::cgaClusterSize(), &r.cgaClusterSize, 0, 1 << 30);
  if (r.cgaClusterSize > 8) r.cgaClusterSize = 8;
  overrideInt(param::minCtas(), &r.minCTAs, 1, 1 << 30);
  overrideInt(param::maxCtas(), &r.maxCTAs, 1, 1 << 30);
  overrideInt(param::splitShareResources(), &r.splitShare, 0, 1);
  overrideInt(param::shrinkShareResources(), &r.shrinkShare, 0, 1);
  overrideInt(param::collnetEnable(), &r.collnetEnable, 0, 1);
  overrideInt(param::ctaPolicy(), &r.ctaPolicy, 0, 2);
  overrideInt(param::nvlinkCentricSched(), &r.nvlinkCentricSched, 0, 1);
  if (std::string net = param::net(); !net.empty()) r.netName = net;
  if (r.maxCTAs > kMaxChannels) r.maxCTAs = kMaxChannels;
  if (r.minCTAs > kMaxChannels) r.minCTAs = kMaxChannels;
  if (r.minCTAs > r.maxCTAs) r.minCTAs = r.maxCTAs;
  *out = r;
  return ncclSuccess;
}

}  // namespace accl
