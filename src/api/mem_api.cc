// Memory entry points. Allocation belongs to the process's device backend (device/backend.h);
// registration records the range (every pointer is usable without it).
#include <map>
#include <mutex>
#include "api/api.h"
#include "base/check.h"
#include "comm/comm.h"
#include "device/backend.h"

using namespace accl;

namespace {

std::mutex gMemMu;

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
  auto backend = dev::processBackend();
  NCCLCHECK(backend->memAlloc("ncclMemAlloc", ptr, size));
  INFO(kSubsysAlloc, "ncclMemAlloc %p size %zu (%s memory)", *ptr, size, backend->name());
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  return dev::processBackend()->memFree("ncclMemFree", ptr);
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

// NCCL 2.30: the user pointer a window was registered with.
NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  std::shared_ptr<Comm> c;
  NCCLCHECK(lookupComm(comm, "ncclWinGetUserPtr", &c));
  if (outUserPtr == nullptr) {
    WARN("ncclWinGetUserPtr: outUserPtr is NULL");
    return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lk(gMemMu);
  auto it = registrations().find(win);
  if (it == registrations().end() || it->second->comm != comm) {
    WARN("ncclWinGetUserPtr: window %p is not a window of comm %p", static_cast<void*>(win),
         static_cast<void*>(comm));
    return ncclInvalidArgument;
  }
  *outUserPtr = it->second->buff;
  return ncclSuccess;
}
