#include "device/hip/hip_driver.h"
#include <cstring>
#include <mutex>
#include "device/hip/kernel_bundle.h"

namespace accl::dev::hip {
namespace {

using cuda::CUcontext;
using cuda::CUdevice;
using cuda::CUdeviceptr;
using cuda::CUevent;
using cuda::CUfunction;
using cuda::CUmodule;
using cuda::CUresult;
using cuda::CUstream;

// The runtime every entry below calls: one per process, set before the table is handed out.
const HipApi* g = nullptr;

// HIP has no contexts for this purpose: a device's "primary context" is the device itself,
// made current with hipSetDevice (per thread, like cuCtxSetCurrent). Ordinal + 1, so that
// device 0 is not a null context.
CUcontext ctxOf(int device) { return reinterpret_cast<CUcontext>(static_cast<uintptr_t>(device) + 1); }
int deviceOf(CUcontext c) { return static_cast<int>(reinterpret_cast<uintptr_t>(c)) - 1; }
hipStream_t hs(CUstream s) { return reinterpret_cast<hipStream_t>(s); }
hipEvent_t he(CUevent e) { return reinterpret_cast<hipEvent_t>(e); }
void* vp(CUdeviceptr p) { return reinterpret_cast<void*>(p); }
CUdeviceptr dp(void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// HIP's error numbers are CUDA's for everything the backend tells apart (success 1 invalid
// value, 2 out of memory, 600 not ready, 704 peer access already enabled), so they pass through.
CUresult init(unsigned) { return g->init(0); }
CUresult driverGetVersion(int* v) { return g->driverGetVersion(v); }
CUresult deviceGetCount(int* n) { return g->getDeviceCount(n); }
CUresult ctxGetDevice(CUdevice* d) { return g->getDevice(d); }
CUresult getErrorString(CUresult e, const char** text) {
  *text = g->getErrorName ? g->getErrorName(e) : nullptr;
  return *text ? kSuccess : cuda::kErrorInvalidValue;
}
CUresult deviceGet(CUdevice* d, int ordinal) {
  int n = 0;
  if (g->getDeviceCount(&n) != kSuccess || ordinal < 0 || ordinal >= n) return kErrorInvalidDevice;
  *d = ordinal;
  return kSuccess;
}
CUresult primaryCtxRetain(CUcontext* ctx, CUdevice d) {
  *ctx = ctxOf(d);
  return kSuccess;
}
CUresult primaryCtxRelease(CUdevice) { return kSuccess; }
CUresult ctxSetCurrent(CUcontext ctx) { return ctx ? g->setDevice(deviceOf(ctx)) : kSuccess; }
CUresult ctxGetCurrent(CUcontext* ctx) {
  int d = 0;
  const hipError_t r = g->getDevice(&d);
  *ctx = r == kSuccess ? ctxOf(d) : nullptr;
  return r;
}
CUresult ctxSynchronize() { return g->deviceSynchronize(); }

// hipPointerGetAttributes answers all attributes at once, in the numbering of the runtime's
// major version (memoryKind); ROCm 5 fails for host memory it does not know, ROCm 6 says
// "unregistered": both are pageable host memory, which cuPointerGetAttribute reports as an error.
CUresult pointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  PointerAttributes a{};
  if (hipError_t r = g->pointerGetAttributes(&a, vp(ptr)); r != kSuccess) return r;
  const MemoryKind kind = memoryKind(a.type, g->runtimeMajor);
  if (kind == MemoryKind::Unregistered || kind == MemoryKind::Unknown) return cuda::kErrorInvalidValue;
  switch (attribute) {
    case cuda::kPointerAttributeMemoryType:
      *static_cast<unsigned*>(data) = kind == MemoryKind::Host     ? cuda::kMemoryTypeHost
                                      : kind == MemoryKind::Device || kind == MemoryKind::Array
                                          ? cuda::kMemoryTypeDevice
                                          : cuda::kMemoryTypeUnified;
      return kSuccess;
    case cuda::kPointerAttributeDeviceOrdinal: *static_cast<int*>(data) = a.device; return kSuccess;
    case cuda::kPointerAttributeIsManaged:
      *static_cast<int*>(data) = a.isManaged || kind == MemoryKind::Managed;
      return kSuccess;
    case cuda::kPointerAttributeContext: *static_cast<CUcontext*>(data) = ctxOf(a.device); return kSuccess;
  }
  return cuda::kErrorInvalidValue;
}

CUresult moduleLoadData(CUmodule* m, const void* image) {
  return g->moduleLoadData(reinterpret_cast<hipModule_t*>(m), image);
}
CUresult moduleGetFunction(CUfunction* fn, CUmodule m, const char* name) {
  return g->moduleGetFunction(reinterpret_cast<hipFunction_t*>(fn), reinterpret_cast<hipModule_t>(m), name);
}
CUresult launchKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared, CUstream s, void** params, void** extra) {
  return g->moduleLaunchKernel(reinterpret_cast<hipFunction_t>(fn), gx, gy, gz, bx, by, bz, shared, hs(s), params,
                               extra);
}
CUresult occupancy(int* blocks, CUfunction fn, int blockSize, size_t shared) {
  return g->moduleOccupancyMaxActiveBlocksPerMultiprocessor(blocks, reinterpret_cast<hipFunction_t>(fn), blockSize,
                                                            shared);
}

CUresult memAlloc(CUdeviceptr* p, size_t bytes) {
  void* q = nullptr;
  const hipError_t r = g->malloc(&q, bytes);
  *p = dp(q);
  return r;
}
// Mailboxes: polled by kernels of other devices and processes while their owner writes them.
// hipMalloc memory is coarse-grained (coherent only at kernel boundaries); fine-grained memory
// is what such flags need, and it can be exported with hipIpcGetMemHandle.
CUresult memAllocShared(CUdeviceptr* p, size_t bytes) {
  void* q = nullptr;
  const hipError_t r = g->extMallocWithFlags(&q, bytes, kDeviceMallocFinegrained);
  *p = dp(q);
  return r;
}
CUresult memFree(CUdeviceptr p) { return g->free(vp(p)); }
CUresult memcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
  hipError_t r = g->memcpyAsync(vp(dst), src, bytes, kMemcpyDefault, nullptr);
  return r == kSuccess ? g->streamSynchronize(nullptr) : r;
}
CUresult memcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
  hipError_t r = g->memcpyAsync(dst, vp(src), bytes, kMemcpyDefault, nullptr);
  return r == kSuccess ? g->streamSynchronize(nullptr) : r;
}
CUresult memcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
  return g->memcpyAsync(vp(dst), vp(src), bytes, kMemcpyDefault, hs(s));
}
CUresult memsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream s) {
  return g->memsetD8Async(vp(dst), value, bytes, hs(s));
}
// Every mapped host allocation of the backend is a flag or a ring that kernels poll while the
// host (or another device) writes it: coherent (fine-grained), or a poller may never see the write.
CUresult memHostAlloc(void** p, size_t bytes, unsigned) {
  return g->hostMalloc(p, bytes, kHostMallocPortable | kHostMallocMapped | kHostMallocCoherent);
}
CUresult memFreeHost(void* p) { return g->hostFree(p); }
CUresult memHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned) {
  void* q = nullptr;
  const hipError_t r = g->hostGetDevicePointer(&q, p, 0);
  *d = dp(q);
  return r;
}
// hipHostRegisterPortable and hipHostRegisterMapped are CUDA's bits (1, 2).
CUresult memHostRegister(void* p, size_t bytes, unsigned flags) { return g->hostRegister(p, bytes, flags); }
CUresult memHostUnregister(void* p) { return g->hostUnregister(p); }
CUresult memGetAddressRange(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  void* b = nullptr;
  const hipError_t r = g->memGetAddressRange(&b, size, vp(p));
  if (base) *base = dp(b);
  return r;
}

// hipIpcOpenMemHandle maps the base of the exporter's allocation. The backend only exports
// whole allocations (allocShared); anything else would open at the wrong address, so it is
// refused here rather than sent with an offset nobody applies.
CUresult ipcGetMemHandle(cuda::IpcMemHandle* h, CUdeviceptr p) {
  void* base = nullptr;
  size_t size = 0;
  if (g->memGetAddressRange(&base, &size, vp(p)) == kSuccess && base != vp(p)) return cuda::kErrorInvalidValue;
  IpcMemHandle x{};
  const hipError_t r = g->ipcGetMemHandle(&x, vp(p));
  static_assert(sizeof(x.reserved) == sizeof(h->reserved));
  std::memcpy(h->reserved, x.reserved, sizeof(x.reserved));
  return r;
}
CUresult ipcOpenMemHandle(CUdeviceptr* p, cuda::IpcMemHandle h, unsigned) {
  IpcMemHandle x{};
  std::memcpy(x.reserved, h.reserved, sizeof(x.reserved));
  void* q = nullptr;
  const unsigned lazy = g->runtimeMajor >= 6 ? kIpcMemLazyEnablePeerAccess6 : kIpcMemLazyEnablePeerAccess5;
  const hipError_t r = g->ipcOpenMemHandle(&q, x, lazy);
  *p = dp(q);
  return r;
}
CUresult ipcCloseMemHandle(CUdeviceptr p) { return g->ipcCloseMemHandle(vp(p)); }

CUresult deviceGetAttribute(int* value, int attribute, CUdevice d) {
  switch (attribute) {
    case cuda::kAttrMultiprocessorCount: return g->deviceGetAttribute(value, kAttrMultiprocessorCount, d);
    case cuda::kAttrCanUseHostPointerForRegisteredMem:
      return g->deviceGetAttribute(value, kAttrCanUseHostPointerForRegisteredMem, d);
  }
  return cuda::kErrorInvalidValue;  // not asked by the backend
}
CUresult deviceGetPCIBusId(char* bus, int len, CUdevice d) { return g->deviceGetPCIBusId(bus, len, d); }
CUresult deviceGetUuid(cuda::Uuid* u, CUdevice d) { return g->deviceGetUuid(u->bytes, d); }
CUresult deviceCanAccessPeer(int* can, CUdevice d, CUdevice peer) { return g->deviceCanAccessPeer(can, d, peer); }
// From the current device (ContextScope made it the backend's) to the peer.
CUresult ctxEnablePeerAccess(CUcontext peer, unsigned) { return g->deviceEnablePeerAccess(deviceOf(peer), 0); }

CUresult streamCreate(CUstream* s, unsigned flags) {
  return g->streamCreateWithFlags(reinterpret_cast<hipStream_t*>(s), flags);  // hipStreamNonBlocking: 1, as CUDA
}
CUresult streamDestroy(CUstream s) { return g->streamDestroy(hs(s)); }
CUresult streamSynchronize(CUstream s) { return g->streamSynchronize(hs(s)); }
CUresult streamQuery(CUstream s) { return g->streamQuery(hs(s)); }
CUresult streamWaitEvent(CUstream s, CUevent e, unsigned flags) { return g->streamWaitEvent(hs(s), he(e), flags); }
CUresult streamIsCapturing(CUstream s, int* status) { return g->streamIsCapturing(hs(s), status); }
// The null stream and hipStreamPerThread (2) belong to the calling thread's device.
CUresult streamGetCtx(CUstream s, CUcontext* ctx) {
  const auto v = reinterpret_cast<uintptr_t>(s);
  int d = 0;
  hipError_t r = v <= 2 || g->streamGetDevice == nullptr ? g->getDevice(&d) : g->streamGetDevice(hs(s), &d);
  *ctx = r == kSuccess ? ctxOf(d) : nullptr;
  return r;
}
CUresult eventCreate(CUevent* e, unsigned flags) {
  return g->eventCreateWithFlags(reinterpret_cast<hipEvent_t*>(e), flags);  // hipEventDisableTiming: 2, as CUDA
}
CUresult eventRecord(CUevent e, CUstream s) { return g->eventRecord(he(e), hs(s)); }
CUresult eventQuery(CUevent e) { return g->eventQuery(he(e)); }
CUresult eventDestroy(CUevent e) { return g->eventDestroy(he(e)); }
// hipStreamCaptureMode: CUDA's values (global 0, thread-local 1, relaxed 2).
CUresult threadExchangeStreamCaptureMode(int* mode) { return g->threadExchangeStreamCaptureMode(mode); }

const void* bundle(size_t* bytes) { return embeddedKernels(bytes); }

cuda::DriverApi build() {
  cuda::DriverApi t;
  t.init = init;
  t.driverGetVersion = driverGetVersion;
  t.deviceGetCount = deviceGetCount;
  t.ctxGetDevice = ctxGetDevice;
  t.pointerGetAttribute = pointerGetAttribute;
  t.getErrorString = getErrorString;
  t.deviceGet = deviceGet;
  t.primaryCtxRetain = primaryCtxRetain;
  t.ctxSetCurrent = ctxSetCurrent;
  t.ctxSynchronize = ctxSynchronize;
  t.moduleLoadData = moduleLoadData;
  t.moduleGetFunction = moduleGetFunction;
  t.memAlloc = memAlloc;
  t.memAllocShared = memAllocShared;
  t.memFree = memFree;
  t.memcpyHtoD = memcpyHtoD;
  t.memcpyDtoH = memcpyDtoH;
  t.launchKernel = launchKernel;
  t.ctxGetCurrent = ctxGetCurrent;
  t.primaryCtxRelease = primaryCtxRelease;
  t.deviceGetAttribute = deviceGetAttribute;
  t.deviceGetPCIBusId = deviceGetPCIBusId;
  t.deviceGetUuid = deviceGetUuid;
  t.streamCreate = streamCreate;
  t.streamDestroy = streamDestroy;
  t.streamSynchronize = streamSynchronize;
  t.streamQuery = streamQuery;
  t.streamWaitEvent = streamWaitEvent;
  t.streamIsCapturing = streamIsCapturing;
  t.streamGetCtx = streamGetCtx;
  t.eventCreate = eventCreate;
  t.eventRecord = eventRecord;
  t.eventQuery = eventQuery;
  t.eventDestroy = eventDestroy;
  t.memcpyAsync = memcpyAsync;
  t.memsetD8Async = memsetD8Async;
  t.memHostAlloc = memHostAlloc;
  t.memFreeHost = memFreeHost;
  t.memHostGetDevicePointer = memHostGetDevicePointer;
  t.memHostRegister = memHostRegister;
  t.memHostUnregister = memHostUnregister;
  t.memGetAddressRange = memGetAddressRange;
  t.ipcGetMemHandle = ipcGetMemHandle;
  t.ipcOpenMemHandle = ipcOpenMemHandle;
  t.ipcCloseMemHandle = ipcCloseMemHandle;
  t.deviceCanAccessPeer = deviceCanAccessPeer;
  t.ctxEnablePeerAccess = ctxEnablePeerAccess;
  t.threadExchangeStreamCaptureMode = threadExchangeStreamCaptureMode;
  t.occupancyMaxActiveBlocksPerMultiprocessor = occupancy;
  t.runtime = "HIP";
  t.backendName = "hip";
  t.kernelImage = bundle;
  t.noKernelsWhy = "clang-19 was not found when it was built";
  return t;
}

}  // namespace

const cuda::DriverApi* hipDriverTable(const HipApi& api) {
  static std::once_flag once;
  static cuda::DriverApi table;
  std::call_once(once, [&] {
    g = &api;
    table = build();
  });
  return &table;
}

}  // namespace accl::dev::hip
