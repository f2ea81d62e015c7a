#include "cuda_session.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "device/cuda/pointer_kind.h"
#include "nccl.h"

namespace accl::perf {

using dev::cuda::CUcontext;
using dev::cuda::CUdevice;
using dev::cuda::CUresult;
using dev::cuda::kSuccess;

std::unique_ptr<CudaSession> CudaSession::open(std::string* why) {
  const dev::cuda::DriverApi* api = dev::cuda::loadDriver(why);
  if (!api) return nullptr;
  int count = 0;
  if (const CUresult r = api->deviceGetCount(&count); r != kSuccess) {
    *why = "cuDeviceGetCount failed: " + dev::cuda::errorText(*api, r);
    return nullptr;
  }
  return std::unique_ptr<CudaSession>(new CudaSession(*api, count));
}

CudaSession::CudaSession(const dev::cuda::DriverApi& api, int deviceCount)
    : api_(api), deviceCount_(deviceCount), contexts_(static_cast<size_t>(deviceCount), nullptr) {}

CudaSession::~CudaSession() {
  for (int d = 0; d < deviceCount_; ++d) {
    if (!contexts_[d]) continue;
    CUdevice device = 0;
    if (api_.deviceGet(&device, d) == kSuccess) api_.primaryCtxRelease(device);
  }
}

CUresult CudaSession::makeCurrent(int device) {
  if (device < 0 || device >= deviceCount_) return dev::cuda::kErrorInvalidValue;
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!contexts_[device]) {
      CUdevice handle = 0;
      if (const CUresult r = api_.deviceGet(&handle, device); r != kSuccess) return r;
      if (const CUresult r = api_.primaryCtxRetain(&contexts_[device], handle); r != kSuccess) return r;
    }
    ctx = contexts_[device];
  }
  return api_.ctxSetCurrent(ctx);
}

std::string CudaSession::deviceName(int device) const {
  // cuDeviceGetName is not in the library's table (it has no use for it): looked up here,
  // optional, from the driver the loader already opened.
  using GetName = CUresult (*)(char*, int, CUdevice);
  GetName getName = nullptr;
  if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    getName = reinterpret_cast<GetName>(dlsym(lib, "cuDeviceGetName"));
    dlclose(lib);  // drops only the reference RTLD_NOLOAD added
  }
  CUdevice handle = 0;
  char name[256] = {};
  if (getName && api_.deviceGet(&handle, device) == kSuccess && getName(name, sizeof name - 1, handle) == kSuccess &&
      name[0])
    return name;
  return "CUDA device " + std::to_string(device);
}

bool CudaSession::pciId(int device, unsigned* domain, unsigned* bus, unsigned* slot) const {
  CUdevice handle = 0;
  char busId[64] = {};
  if (api_.deviceGet(&handle, device) != kSuccess ||
      api_.deviceGetPCIBusId(busId, static_cast<int>(sizeof busId - 1), handle) != kSuccess)
    return false;
  return std::sscanf(busId, "%x:%x:%x", domain, bus, slot) == 3;
}

bool CudaSession::libraryGivesDeviceMemory(int device, std::string* why, bool* failed) {
  *failed = true;
  if (const CUresult r = makeCurrent(device); r != kSuccess) {
    *why = "cannot make device " + std::to_string(device) + " current: " + cudaErrorText(*this, r);
    return false;
  }
  void* p = nullptr;
  if (const ncclResult_t r = ncclMemAlloc(&p, 4096); r != ncclSuccess) {
    *why = std::string("ncclMemAlloc failed: ") + ncclGetErrorString(r);
    return false;
  }
  *failed = false;
  const dev::cuda::PointerInfo info = dev::cuda::pointerInfo(api_, p);
  ncclMemFree(p);
  if (info.kind == dev::cuda::PointerKind::Device) return true;
  *why = std::string("ncclMemAlloc returned ") + dev::cuda::pointerKindName(info.kind);
  return false;
}

BufferMode chooseBufferMode(BufferRequest request, int probeDevice, std::unique_ptr<CudaSession>* session) {
  BufferFacts facts;
  const char* backend = std::getenv("ACCL_BACKEND");
  facts.backendSetting = backend ? backend : "";
  session->reset();
  if (request == BufferRequest::kHost && facts.backendSetting != "host") {
    // Before the library's first call: it decides its backend once, at the first
    // communicator or ncclMemAlloc. Under its CUDA backend ncclMemAlloc is device memory.
    setenv("ACCL_BACKEND", "host", 1);
  }
  if (wantsDriver(request, facts.backendSetting)) {
    *session = CudaSession::open(&facts.driverWhy);
    facts.driverLoaded = *session != nullptr;
    if (*session) facts.deviceCount = (*session)->deviceCount();
    if (facts.deviceCount > 0) {
      facts.probed = true;
      facts.libraryGivesDeviceMemory = (*session)->libraryGivesDeviceMemory(probeDevice % facts.deviceCount,
                                                                            &facts.probeWhy, &facts.probeFailed);
    }
  }
  BufferMode mode = decideBufferMode(request, facts);
  if (!mode.device) session->reset();
  return mode;
}

std::string cudaErrorText(const CudaSession& session, CUresult r) { return dev::cuda::errorText(session.api(), r); }

}  // namespace accl::perf
