// ipc.cc: CUDA IPC between processes. A handle names the exporter's memfd by
// (pid, fd number, offset, size); the importer opens /proc/<pid>/fd/<n> and maps the piece as
// device memory of its own (a PROT_NONE view plus a shadow). Opening a handle of the same
// process fails with CUDA_ERROR_INVALID_CONTEXT, as the real driver does; opening one twice
// in a process returns the same address and counts references.
#include <fcntl.h>
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
};
static_assert(sizeof(HandleBody) <= sizeof(CUipcMemHandle));

using Key = std::tuple<uint32_t, int32_t, uint64_t>;
struct Opened {
  uintptr_t base;
  int refs;
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
  if (pHandle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  Range r = findRange(dptr);
  if (r.kind != MemKind::Device) return CUDA_ERROR_INVALID_VALUE;
  HandleBody body{kMagic, static_cast<uint32_t>(getpid()), r.fd, 0, r.fdOffset, r.size};
  std::memset(pHandle, 0, sizeof *pHandle);
  std::memcpy(pHandle->reserved, &body, sizeof body);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  if (pdptr == nullptr || (flags & ~unsigned{CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}) != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  if (CUresult r = refuseIfCaptureForbids("cuIpcOpenMemHandle")) return r;
  HandleBody body;
  std::memcpy(&body, handle.reserved, sizeof body);
  if (body.magic != kMagic || body.size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (body.pid == static_cast<uint32_t>(getpid())) return CUDA_ERROR_INVALID_CONTEXT;
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
  uintptr_t base = 0;
  if (CUresult r = importRange(ctx, fd, body.offset, body.size, &base)) return r;
  t.byKey[key] = {base, 1};
  t.byBase[base] = key;
  *pdptr = base;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  if (CUresult r = refuseIfCaptureForbids("cuIpcCloseMemHandle")) return r;
  OpenTable& t = opened();
  std::lock_guard<std::mutex> g(t.mu);
  auto b = t.byBase.find(dptr);
  if (b == t.byBase.end()) return CUDA_ERROR_INVALID_VALUE;
  auto it = t.byKey.find(b->second);
  if (--it->second.refs > 0) return CUDA_SUCCESS;
  t.byKey.erase(it);
  t.byBase.erase(b);
  return unimportRange(dptr);
}
