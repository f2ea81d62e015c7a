// memory.cc: where the fake keeps memory. Device memory is one memfd per process ("HBM"),
// mapped twice: a PROT_NONE view whose addresses the program gets (so host code that touches
// a device buffer faults, as it would on a GPU) and a read-write shadow only the fake's engine
// uses. Allocations are page-aligned pieces of it; freed pieces give their pages back
// (fallocate punch hole). IPC imports map another process's memfd the same two ways. Host
// memory that the "GPU" may touch (cuMemHostAlloc, cuMemHostRegister) is recorded by range.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <shared_mutex>
#include "internal.h"

namespace fakecuda {
namespace {

constexpr size_t kPage = 4096;
size_t roundUp(size_t n) { return (n + kPage - 1) / kPage * kPage; }

class Memory {
 public:
  std::shared_mutex mu;
  std::map<uintptr_t, Range> ranges;  // every kind, by base address

  // The arena, made on first use (a process that never allocates maps nothing).
  bool ensureArena() {
    if (fd_ >= 0) return true;
    const char* env = std::getenv("FAKE_CUDA_MEMORY_GIB");
    size_t gib = env && *env ? std::strtoull(env, nullptr, 10) : 64;
    size_t bytes = (gib ? gib : 64) << 30;
    int fd = memfd_create("fake-cuda-device-memory", MFD_CLOEXEC);
    if (fd < 0) return fail("memfd_create");
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      close(fd);
      return fail("ftruncate");
    }
    void* view = mmap(nullptr, bytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    void* shadow = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (view == MAP_FAILED || shadow == MAP_FAILED) {
      if (view != MAP_FAILED) munmap(view, bytes);
      if (shadow != MAP_FAILED) munmap(shadow, bytes);
      close(fd);
      return fail("mmap");
    }
    fd_ = fd;
    bytes_ = bytes;
    view_ = static_cast<char*>(view);
    shadow_ = static_cast<char*>(shadow);
    free_[0] = bytes;
    return true;
  }

  // First fit over the free pieces; returns the offset or SIZE_MAX.
  size_t take(size_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      size_t offset = it->first, left = it->second - bytes;
      free_.erase(it);
      if (left) free_[offset + bytes] = left;
      return offset;
    }
    return SIZE_MAX;
  }

  void give(size_t offset, size_t bytes) {
    fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset), static_cast<off_t>(bytes));
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && offset + bytes == next->first) {
      bytes += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += bytes;
        return;
      }
    }
    free_[offset] = bytes;
  }

  int fd() const { return fd_; }
  size_t bytes() const { return bytes_; }
  size_t used = 0;  // guarded by mu
  char* view() const { return view_; }
  char* shadow() const { return shadow_; }

  // Any range overlapping [lo, lo+bytes)?
  bool overlaps(uintptr_t lo, size_t bytes) {
    auto it = ranges.lower_bound(lo + bytes);
    if (it == ranges.begin()) return false;
    --it;
    return it->first + it->second.size > lo;
  }

 private:
  bool fail(const char* what) {
    report("cannot create the device memory arena: %s: %s", what, strerror(errno));
    return false;
  }
  int fd_ = -1;
  size_t bytes_ = 0;
  char* view_ = nullptr;
  char* shadow_ = nullptr;
  std::map<size_t, size_t> free_;  // offset -> bytes
};

Memory& memory() {
  static Memory* m = new Memory;  // never destroyed: stream threads may run at exit
  return *m;
}

}  // namespace

CUresult deviceAlloc(Context* ctx, size_t bytes, bool streamOrdered, uintptr_t* out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Memory& m = memory();
  std::unique_lock<std::shared_mutex> g(m.mu);
  if (!m.ensureArena()) return CUDA_ERROR_OUT_OF_MEMORY;
  const size_t mapped = roundUp(bytes);
  const size_t offset = m.take(mapped);
  if (offset == SIZE_MAX) return CUDA_ERROR_OUT_OF_MEMORY;
  Range r;
  r.kind = MemKind::Device;
  r.base = reinterpret_cast<uintptr_t>(m.view() + offset);
  r.size = bytes;
  r.shadow = m.shadow() + offset;
  r.ctx = ctx;
  r.fd = m.fd();
  r.fdOffset = offset;
  r.mapped = mapped;
  r.streamOrdered = streamOrdered;
  m.ranges[r.base] = r;
  m.used += mapped;
  *out = r.base;
  return CUDA_SUCCESS;
}

namespace {
std::atomic<unsigned long long> gFreesWhileOpen{0};
}

unsigned long long freesWhileOpen() { return gFreesWhileOpen.load(); }

CUresult deviceFree(uintptr_t base) {
  Memory& m = memory();
  std::unique_lock<std::shared_mutex> g(m.mu);
  auto it = m.ranges.find(base);
  if (it == m.ranges.end() || it->second.kind != MemKind::Device) return CUDA_ERROR_INVALID_VALUE;
  if (ExportSlot* slot = it->second.exportSlot) {
    slot->alive.store(0);
    if (const int opens = slot->opens.load(); opens > 0 && ++gFreesWhileOpen)
      report("cuMemFree(0x%lx): %d other process(es) still have this allocation open through CUDA IPC "
             "(cuIpcOpenMemHandle): undefined behaviour on a GPU; their later device accesses to it fault here",
             base, opens);
  }
  m.give(it->second.fdOffset, it->second.mapped);
  m.used -= it->second.mapped;
  m.ranges.erase(it);
  return CUDA_SUCCESS;
}

size_t deviceMemoryBytes() {
  Memory& m = memory();
  std::unique_lock<std::shared_mutex> g(m.mu);
  return m.ensureArena() ? m.bytes() : 0;
}

size_t deviceMemoryUsed() {
  Memory& m = memory();
  std::shared_lock<std::shared_mutex> g(m.mu);
  return m.used;
}

void setExportSlot(uintptr_t base, ExportSlot* slot) {
  Memory& m = memory();
  std::unique_lock<std::shared_mutex> g(m.mu);
  auto it = m.ranges.find(base);
  if (it != m.ranges.end()) it->second.exportSlot = slot;
}

CUresult importRange(Context* ctx, int fd, size_t fdOffset, size_t size, ExportSlot* slot, uintptr_t* out) {
  const size_t mapped = roundUp(size);
  void* view = mmap(nullptr, mapped, PROT_NONE, MAP_SHARED, fd, static_cast<off_t>(fdOffset));
  void* shadow = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(fdOffset));
  if (view == MAP_FAILED || shadow == MAP_FAILED) {
    report("cuIpcOpenMemHandle: cannot map the exported memory: %s", strerror(errno));
    if (view != MAP_FAILED) munmap(view, mapped);
    if (shadow != MAP_FAILED) munmap(shadow, mapped);
    close(fd);
    return CUDA_ERROR_MAP_FAILED;
  }
  Range r;
  r.kind = MemKind::Imported;
  r.exportSlot = slot;
  r.base = reinterpret_cast<uintptr_t>(view);
  r.size = size;
  r.shadow = static_cast<char*>(shadow);
  r.ctx = ctx;
  r.fd = fd;
  r.fdOffset = fdOffset;
  r.mapped = mapped;
  Memory& m = memory();
  std::unique_lock<std::shared_mutex> g(m.mu);
  m.ranges[r.base] = r;
  *out = r.base;
  return CUDA_SUCCESS;
}

CUresult unimportRange(uintptr_t base) {
  Memory& m = memory();
  std::unique_lock<std::shared_mutex> g(m.mu);
  auto it = m.ranges.find(base);
  if (it == m.ranges.end() || it->second.kind != MemKind::Imported) return CUDA_ERROR_INVALID_VALUE;
  Range r = it->second;
  m.ranges.erase(it);
  munmap(reinterpret_cast<void*>(r.base), r.mapped);
  munmap(r.shadow, r.mapped);
  close(r.fd);
  return CUDA_SUCCESS;
}

CUresult hostAlloc(Context* ctx, size_t bytes, void** out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  const size_t mapped = roundUp(bytes);
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  Range r;
  r.kind = MemKind::HostAlloc;
  r.base = reinterpret_cast<uintptr_t>(p);
  r.size = bytes;
  r.shadow = static_cast<char*>(p);
  r.ctx = ctx;
  r.mapped = mapped;
  r.deviceMapped = true;  // unified addressing: every cuMemHostAlloc'd range, whatever its flags
  Memory& m = memory();
  std::unique_lock<std::shared_mutex> g(m.mu);
  m.ranges[r.base] = r;
  *out = p;
  return CUDA_SUCCESS;
}

CUresult hostFree(void* p) {
  Memory& m = memory();
  std::unique_lock<std::shared_mutex> g(m.mu);
  auto it = m.ranges.find(reinterpret_cast<uintptr_t>(p));
  if (it == m.ranges.end() || it->second.kind != MemKind::HostAlloc) return CUDA_ERROR_INVALID_VALUE;
  munmap(p, it->second.mapped);
  m.ranges.erase(it);
  return CUDA_SUCCESS;
}

CUresult hostRegister(Context* ctx, void* p, size_t bytes, bool deviceMapped) {
  if (p == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Memory& m = memory();
  std::unique_lock<std::shared_mutex> g(m.mu);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  if (m.overlaps(lo, bytes)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  Range r;
  r.kind = MemKind::HostRegistered;
  r.base = lo;
  r.size = bytes;
  r.shadow = static_cast<char*>(p);
  r.ctx = ctx;
  r.deviceMapped = deviceMapped;
  m.ranges[lo] = r;
  return CUDA_SUCCESS;
}

size_t registeredHostBytes() {
  Memory& m = memory();
  std::shared_lock<std::shared_mutex> g(m.mu);
  size_t total = 0;
  for (const auto& [base, r] : m.ranges)
    if (r.kind == MemKind::HostRegistered) total += r.size;
  return total;
}

CUresult hostUnregister(void* p) {
  Memory& m = memory();
  std::unique_lock<std::shared_mutex> g(m.mu);
  auto it = m.ranges.find(reinterpret_cast<uintptr_t>(p));
  if (it == m.ranges.end() || it->second.kind != MemKind::HostRegistered) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  m.ranges.erase(it);
  return CUDA_SUCCESS;
}

Range findRange(uintptr_t addr) {
  Memory& m = memory();
  std::shared_lock<std::shared_mutex> g(m.mu);
  auto it = m.ranges.upper_bound(addr);
  if (it == m.ranges.begin()) return {};
  --it;
  if (addr - it->first >= it->second.size) return {};
  return it->second;
}

namespace {
// An imported allocation its exporter has freed: gone for this process's device accesses.
bool freedByExporter(const Range& r, uintptr_t addr) {
  if (r.kind != MemKind::Imported || r.exportSlot == nullptr || r.exportSlot->alive.load() != 0) return false;
  report("device access to 0x%lx: the exporting process freed this CUDA IPC allocation while this process still had "
         "it open (cuIpcOpenMemHandle); the mapping is gone (CUDA_ERROR_ILLEGAL_ADDRESS)",
         addr);
  return true;
}
}  // namespace

char* kernelAddress(uintptr_t addr, size_t bytes) {
  Range r = findRange(addr);
  if (r.kind == MemKind::None || bytes > r.size - (addr - r.base)) return nullptr;
  if (freedByExporter(r, addr)) return nullptr;
  if (r.kind == MemKind::HostRegistered && !r.deviceMapped) {
    report("device access to 0x%lx: host memory registered without CU_MEMHOSTREGISTER_DEVICEMAP is not mapped for "
           "the device (register it with DEVICEMAP and use the address from cuMemHostGetDevicePointer)",
           addr);
    return nullptr;
  }
  return r.shadow + (addr - r.base);
}

char* copyAddress(uintptr_t addr, size_t bytes) {
  Range r = findRange(addr);
  // Pageable host memory (memcpy may use it), or host memory the driver knows: as is.
  if (r.kind == MemKind::None || r.kind == MemKind::HostAlloc || r.kind == MemKind::HostRegistered)
    return reinterpret_cast<char*>(addr);
  if (bytes > r.size - (addr - r.base) || freedByExporter(r, addr)) return nullptr;
  return r.shadow + (addr - r.base);
}

}  // namespace fakecuda
