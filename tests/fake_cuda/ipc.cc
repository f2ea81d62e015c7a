// ipc.cc: CUDA IPC between processes. A handle names the exporter's memfd by
// (pid, fd number, offset, size); the importer opens /proc/<pid>/fd/<n> and maps the piece as
// device memory of its own (a PROT_NONE view plus a shadow). Opening a handle of the same
// process fails with CUDA_ERROR_INVALID_CONTEXT, as the real driver does; opening one twice
// in a process returns the same address and counts references.
// Each exported allocation also gets a slot in the exporter's export table (a second memfd,
// named in the handle too) that importers map: it says whether the exporter has freed the
// allocation (then an importer's device access faults) and how many processes have it open
// (the exporter's cuMemFree says so when some still do: undefined behaviour on a GPU).
#include <cstdio>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <map>
#include <tuple>
#include "internal.h"

namespace fakecuda {
namespace {

constexpr uint32_t kMagic = 0x46434950;  // "FCIP"

struct HandleBody {
  uint32_t magic;
  uint32_t pid;
  int32_t fd;
  uint32_t pad;
  uint64_t offset;
  uint64_t size;
  int32_t tableFd;  // the exporter's export table
  uint32_t slot;    // this allocation's slot in it
};

// Slots are handed out once and never reused, so a stale handle never names a live slot.
constexpr size_t kTableBytes = size_t{1} << 20;
constexpr uint32_t kSlots = kTableBytes / sizeof(ExportSlot);

struct ExportTable {
  std::mutex mu;
  int fd = -1;
  ExportSlot* slots = nullptr;
  uint32_t next = 0;
};
ExportTable& exportTable() {
  static ExportTable* t = new ExportTable;
  return *t;
}

// The slot of the allocation `r` (made at its first export); null when the table cannot be made.
ExportSlot* slotFor(const Range& r, int* tableFd, uint32_t* index) {
  ExportTable& t = exportTable();
  std::lock_guard<std::mutex> g(t.mu);
  if (t.fd < 0) {
    int fd = memfd_create("fake-cuda-ipc-exports", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, kTableBytes) != 0) {
      if (fd >= 0) close(fd);
      return nullptr;
    }
    void* p = mmap(nullptr, kTableBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      return nullptr;
    }
    t.fd = fd;
    t.slots = static_cast<ExportSlot*>(p);
  }
  *tableFd = t.fd;
  if (r.exportSlot != nullptr) {
    *index = static_cast<uint32_t>(r.exportSlot - t.slots);
    return r.exportSlot;
  }
  if (t.next == kSlots) return nullptr;
  *index = t.next++;
  ExportSlot* slot = &t.slots[*index];
  slot->alive.store(1);
  slot->opens.store(0);
  setExportSlot(r.base, slot);
  return slot;
}

// An importer's view of the exporter's export table (mapped once per exporter, never unmapped).
ExportSlot* mapSlot(uint32_t pid, int tableFd, uint32_t index) {
  static std::mutex mu;
  static std::map<std::pair<uint32_t, int>, ExportSlot*> tables;
  if (index >= kSlots) return nullptr;
  std::lock_guard<std::mutex> g(mu);
  ExportSlot*& table = tables[{pid, tableFd}];
  if (table == nullptr) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/fd/%d", pid, tableFd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return nullptr;
    void* p = mmap(nullptr, kTableBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return nullptr;
    table = static_cast<ExportSlot*>(p);
  }
  return &table[index];
}
static_assert(sizeof(HandleBody) <= sizeof(CUipcMemHandle));

using Key = std::tuple<uint32_t, int32_t, uint64_t>;
struct Opened {
  uintptr_t base;
  int refs;
  ExportSlot* slot;
};
struct OpenTable {
  std::mutex mu;
  std::map<Key, Opened> byKey;
  std::map<uintptr_t, Key> byBase;
};
OpenTable& opened() {
  static OpenTable* t = new OpenTable;
  return *t;
}

}  // namespace
}  // namespace fakecuda

using namespace fakecuda;

// Any address inside an allocation names the whole allocation; the importer gets its base.
FAKE_CUDA_API CUresult cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  noteCall("cuIpcGetMemHandle");
  if (pHandle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  Range r = findRange(dptr);
  if (r.kind != MemKind::Device) return CUDA_ERROR_INVALID_VALUE;
  int tableFd = -1;
  uint32_t index = 0;
  if (slotFor(r, &tableFd, &index) == nullptr) {
    report("cuIpcGetMemHandle: cannot make the export table: %s", strerror(errno));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  HandleBody body{kMagic, static_cast<uint32_t>(getpid()), r.fd, 0, r.fdOffset, r.size, tableFd, index};
  std::memset(pHandle, 0, sizeof *pHandle);
  std::memcpy(pHandle->reserved, &body, sizeof body);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  noteCall("cuIpcOpenMemHandle_v2");
  if (pdptr == nullptr || (flags & ~unsigned{CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}) != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  if (CUresult r = refuseIfCaptureForbids("cuIpcOpenMemHandle")) return r;
  HandleBody body;
  std::memcpy(&body, handle.reserved, sizeof body);
  if (body.magic != kMagic || body.size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (body.pid == static_cast<uint32_t>(getpid())) {
    report("cuIpcOpenMemHandle: the handle was exported by this process: CUDA IPC handles open only in another "
           "process (within one, use the pointer itself); CUDA_ERROR_INVALID_CONTEXT");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  const Key key{body.pid, body.fd, body.offset};
  OpenTable& t = opened();
  std::lock_guard<std::mutex> g(t.mu);
  auto it = t.byKey.find(key);
  if (it != t.byKey.end()) {
    it->second.refs++;
    *pdptr = it->second.base;
    return CUDA_SUCCESS;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%u/fd/%d", body.pid, body.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    report("cuIpcOpenMemHandle: cannot open the exporter's memory %s: %s (has it exited?)", path, strerror(errno));
    return CUDA_ERROR_INVALID_HANDLE;
  }
  ExportSlot* slot = mapSlot(body.pid, body.tableFd, body.slot);
  if (slot == nullptr || slot->alive.load() == 0) {
    close(fd);
    report("cuIpcOpenMemHandle: the exporting process (pid %u) has freed this allocation", body.pid);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  uintptr_t base = 0;
  if (CUresult r = importRange(ctx, fd, body.offset, body.size, slot, &base)) return r;
  slot->opens.fetch_add(1);
  t.byKey[key] = {base, 1, slot};
  t.byBase[base] = key;
  *pdptr = base;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  noteCall("cuIpcCloseMemHandle");
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  if (CUresult r = refuseIfCaptureForbids("cuIpcCloseMemHandle")) return r;
  OpenTable& t = opened();
  std::lock_guard<std::mutex> g(t.mu);
  auto b = t.byBase.find(dptr);
  if (b == t.byBase.end()) return CUDA_ERROR_INVALID_VALUE;
  auto it = t.byKey.find(b->second);
  if (--it->second.refs > 0) return CUDA_SUCCESS;
  if (it->second.slot) it->second.slot->opens.fetch_sub(1);
  t.byKey.erase(it);
  t.byBase.erase(b);
  return unimportRange(dptr);
}
