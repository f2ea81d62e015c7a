#include "device/cuda/pointer_kind.h"
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

namespace accl::dev::cuda {

namespace {

struct CachedRange {
  uintptr_t end;  // one past the range
  PointerInfo info;
};

// Device and managed allocations seen, by start address (ranges never overlap while alive).
class RangeCache {
 public:
  bool find(uintptr_t p, PointerInfo* out) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = ranges_.upper_bound(p);
    if (it == ranges_.begin()) return false;
    --it;
    if (p >= it->second.end) return false;
    *out = it->second.info;
    out->cached = true;
    return true;
  }
  void add(uintptr_t start, size_t bytes, const PointerInfo& info) {
    std::lock_guard<std::mutex> lk(mu_);
    eraseOverlapping(start, start + bytes);
    ranges_[start] = {start + bytes, info};
  }
  void forget(uintptr_t p) {
    std::lock_guard<std::mutex> lk(mu_);
    eraseOverlapping(p, p + 1);
  }

 private:
  // A stale range (freed unseen) that a new allocation overlaps goes.
  void eraseOverlapping(uintptr_t lo, uintptr_t hi) {
    auto it = ranges_.upper_bound(lo);
    if (it != ranges_.begin() && std::prev(it)->second.end > lo) --it;
    while (it != ranges_.end() && it->first < hi) it = ranges_.erase(it);
  }
  std::mutex mu_;
  std::map<uintptr_t, CachedRange> ranges_;
};

RangeCache& cache() {
  static RangeCache* c = new RangeCache;  // never destroyed: frees may come during exit
  return *c;
}

PointerInfo askDriver(const DriverApi& api, CUdeviceptr addr) {
  PointerInfo info;
  unsigned type = 0;
  // Pageable host memory the driver never saw is an error here (CUDA_ERROR_INVALID_VALUE):
  // that is host memory too.
  if (api.pointerGetAttribute(&type, kPointerAttributeMemoryType, addr) != kSuccess) return info;
  info.known = true;
  int ordinal = -1;
  if (api.pointerGetAttribute(&ordinal, kPointerAttributeDeviceOrdinal, addr) != kSuccess) ordinal = -1;
  info.device = ordinal;
  int managed = 0;
  if (api.pointerGetAttribute(&managed, kPointerAttributeIsManaged, addr) != kSuccess) managed = 0;
  if (managed || type == kMemoryTypeUnified) info.kind = PointerKind::Managed;
  else if (type == kMemoryTypeDevice) info.kind = PointerKind::Device;
  return info;
}

}  // namespace

const char* pointerKindName(PointerKind k) {
  switch (k) {
    case PointerKind::Host: return "host memory";
    case PointerKind::Device: return "device memory";
    case PointerKind::Managed: return "managed memory";
  }
  return "?";
}

PointerInfo pointerInfo(const DriverApi& api, const void* p, bool fresh) {
  const auto addr = reinterpret_cast<CUdeviceptr>(p);
  PointerInfo info;
  if (!fresh && cache().find(addr, &info)) return info;
  info = askDriver(api, addr);
  if (info.kind == PointerKind::Host) return info;
  CUdeviceptr start = 0;
  size_t bytes = 0;
  // Drivers that cannot say the range (HIP's face here) are asked every time.
  if (api.pointerGetAttribute(&start, kPointerAttributeRangeStartAddr, addr) == kSuccess &&
      api.pointerGetAttribute(&bytes, kPointerAttributeRangeSize, addr) == kSuccess && bytes > 0 && start <= addr &&
      addr - start < bytes)
    cache().add(start, bytes, info);
  return info;
}

void forgetPointerRange(const void* p) {
  if (p != nullptr) cache().forget(reinterpret_cast<uintptr_t>(p));
}

}  // namespace accl::dev::cuda
