// Memory entry points. On the host backend "device memory" is page-aligned host memory;
// registration records the range (every pointer is usable without it).
#include <cstdlib>
#include <map>
#include <mutex>
#include "api/api.h"
#include "base/check.h"
#include "comm/comm.h"

using namespace accl;

namespace {

std::mutex gMemMu;
std::map<void*, size_t>& allocations() {
  static std::map<void*, size_t> m;
  return m;
}

struct Registration {
  ncclComm_t comm;
  void* buff;
  size_t size;
};
std::map<void*, std::unique_ptr<Registration>>& registrations() {
  static std::map<void*, std::unique_ptr<Registration>> m;
  return m;
}

ncclResult_t addRegistration(const char* fn, ncclComm_t comm, void* buff, size_t size, void** handle) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, fn, &c));
  if (handle == nullptr) {
    WARN("%s: handle output pointer is NULL", fn);
    return ncclInvalidArgument;
  }
  if (buff == nullptr && size > 0) {
    WARN("%s: buff is NULL with size = %zu", fn, size);
    return ncclInvalidArgument;
  }
  auto reg = std::make_unique<Registration>(Registration{comm, buff, size});
  *handle = reg.get();
  std::lock_guard<std::mutex> lk(gMemMu);
  registrations()[reg.get()] = std::move(reg);
  return ncclSuccess;
}

ncclResult_t removeRegistration(const char* fn, ncclComm_t comm, void* handle) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, fn, &c));
  std::lock_guard<std::mutex> lk(gMemMu);
  auto it = registrations().find(handle);
  if (it == registrations().end() || it->second->comm != comm) {
    WARN("%s: handle %p is not a registration of comm %p", fn, handle, static_cast<void*>(comm));
    return ncclInvalidArgument;
  }
  registrations().erase(it);
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  if (ptr == nullptr) {
    WARN("ncclMemAlloc: ptr is NULL");
    return ncclInvalidArgument;
  }
  size_t rounded = (size + 4095) & ~size_t(4095);
  if (rounded < size) {
    WARN("ncclMemAlloc: size = %zu is too large", size);
    return ncclInvalidArgument;
  }
  void* p = std::aligned_alloc(4096, rounded ? rounded : 4096);
  if (p == nullptr) {
    WARN("ncclMemAlloc: out of host memory allocating %zu bytes", size);
    return ncclSystemError;
  }
  std::lock_guard<std::mutex> lk(gMemMu);
  allocations()[p] = rounded;
  *ptr = p;
  INFO(kSubsysAlloc, "ncclMemAlloc %p size %zu", p, size);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lk(gMemMu);
    if (allocations().erase(ptr) == 0) {
      WARN("ncclMemFree: %p was not returned by ncclMemAlloc (or was already freed)", ptr);
      return ncclInvalidArgument;
    }
  }
  std::free(ptr);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return addRegistration("ncclCommRegister", comm, buff, size, handle);
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  return removeRegistration("ncclCommDeregister", comm, handle);
}

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
         int winFlags) {
  if (winFlags != NCCL_WIN_DEFAULT && winFlags != NCCL_WIN_COLL_SYMMETRIC) {
    WARN("ncclCommWindowRegister: winFlags = %d is invalid", winFlags);
    return ncclInvalidArgument;
  }
  void* handle = nullptr;
  NCCLCHECK(addRegistration("ncclCommWindowRegister", comm, buff, size, win ? &handle : nullptr));
  *win = static_cast<ncclWindow_t>(handle);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  return removeRegistration("ncclCommWindowDeregister", comm, win);
}
