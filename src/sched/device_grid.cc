#include "sched/device_grid.h"
#include <algorithm>
#include <cstddef>
#include "base/log.h"
#include "base/param.h"
#include "collective_args.h"

namespace accl {
namespace {

// Below this a message is latency, not bandwidth: one block of kSmallThreads per task.
constexpr size_t kSmallBytes = 64 << 10;
constexpr unsigned kSmallThreads = 128;
// From here every rank runs at least kBigBlocks blocks (scaled by SMs against kRefSms).
constexpr size_t kBigBytes = 1 << 20;
constexpr int kBigBlocks = 16;
constexpr int kRefSms = 132;

// NCCL_NTHREADS when it is one NCCL takes (a multiple of 64 in 64..kMaxCollThreads), else 0.
unsigned threadsFromEnv() {
  const long long v = param::nthreads();
  if (v <= 0) return 0;
  if (v % 64 != 0 || v < 64 || v > static_cast<long long>(kern::kMaxCollThreads)) {
    static const bool warned = [v] {
      WARN("NCCL_NTHREADS=%lld ignored: the collective kernel takes a multiple of 64 from 64 to %u", v,
           kern::kMaxCollThreads);
      return true;
    }();
    (void)warned;
    return 0;
  }
  return static_cast<unsigned>(v);
}

}  // namespace

DeviceGrid chooseDeviceGrid(OpKind kind, size_t bytes, int nranks, int sms) {
  DeviceGrid g{1, kSmallThreads};
  if (bytes >= kSmallBytes) {
    g.threads = bytes >= kBigBytes / 4 ? kern::kMaxCollThreads : 256;
    // Between the two: one more block per 64 KiB, up to the big figure.
    const int big = std::clamp(kBigBlocks * (sms > 0 ? sms : kRefSms) / kRefSms, kBigBlocks, kern::kMaxLaunchBlocks);
    g.blocksPerRank = bytes >= kBigBytes ? big : std::min(big, static_cast<int>(bytes / kSmallBytes));
  }
  const long long minBlocks = param::minNchannels(), maxBlocks = param::maxNchannels();
  if (minBlocks > 0) g.blocksPerRank = std::max(g.blocksPerRank, static_cast<int>(std::min<long long>(minBlocks, kern::kMaxLaunchBlocks)));
  if (maxBlocks > 0) g.blocksPerRank = std::min(g.blocksPerRank, static_cast<int>(maxBlocks));
  if (const unsigned t = threadsFromEnv()) g.threads = t;
  INFO(kSubsysTuning, "%s: %zu bytes on %d ranks -> collective kernel, %d blocks per rank of %u threads (%d SMs)",
       opKindName(kind), bytes, nranks, g.blocksPerRank, g.threads, sms);
  return g;
}

}  // namespace accl
