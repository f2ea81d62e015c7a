// config.h: ncclConfig_t as the library sees it, after the size/magic/version protocol.
#pragma once
#include <string>
#include "nccl.h"

namespace accl {

struct Config {
  int blocking = 1;
  int cgaClusterSize = 4;
  int minCTAs = 1;
  int maxCTAs = 64;
  std::string netName;
  int splitShare = 0;
  int trafficClass = NCCL_CONFIG_UNDEF_INT;
  std::string commName;
  int collnetEnable = 0;
  int ctaPolicy = NCCL_CTA_POLICY_DEFAULT;
  int shrinkShare = 0;
  int nvlsCTAs = NCCL_CONFIG_UNDEF_INT;
  int nChannelsPerNetPeer = NCCL_CONFIG_UNDEF_INT;
  int nvlinkCentricSched = 0;
};

// Reads a caller's config of any header version (NULL = defaults, or `inherit` if given),
// validates ranges, applies environment overrides. Never writes to `user`.
ncclResult_t parseConfig(const ncclConfig_t* user, const Config* inherit, Config* out);

}  // namespace accl
