// hip_face.cc: the fake driver's HIP runtime face, build/tests/fake_cuda/libamdhip64.so.6. Every
// HIP entry point ACCL's loader binds (src/device/hip/hip_api.cc), and those a test program
// needs (graphs, hipStreamCreate), implemented on the fake CUDA driver's core (libcuda.so.1
// here, which it links): the same devices, memory, streams, capture, IPC and kernels, which run
// as the emulated host build of kernels/device_kernels.h, looked up by the names the HIP bundle
// carries. What HIP does differently from CUDA is emulated here, so the HIP backend's adapters
// (src/device/hip/hip_driver.cc) are what is tested:
//   - no contexts: a per-thread current device (hipSetDevice; device 0 until set);
//   - hipModuleLoadData takes a clang offload bundle only (the CUDA fatbin is refused);
//   - hipPointerGetAttributes in ROCm 6's numbering (host 1, device 2; unknown host memory is
//     "unregistered", 0, with success), or ROCm 5's with FAKE_HIP_ROCM_MAJOR=5 (host 0, device
//     1; unknown host memory is an error);
//   - hipIpcGetMemHandle names the whole allocation: hipIpcOpenMemHandle returns its base;
//     the flags must be the runtime's hipIpcMemLazyEnablePeerAccess (6: 1, 5: 0);
//   - hipStreamWaitValue64 takes a mask (only all bits are supported here);
//   - hipHostMalloc without hipHostMallocCoherent is counted (fakeHipNonCoherentHostAllocs):
//     on an AMD GPU such memory is not a place for flags that kernels poll; fine-grained
//     hipExtMallocWithFlags allocations are counted too (fakeHipFineGrainedAllocs).
// HIP's error numbers equal CUDA's for every error the fake returns, so they pass through.
#include <cstdint>
#include <cuda.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

using hipError_t = int;
constexpr hipError_t kSuccess = 0, kInvalidValue = 1, kInvalidDevice = 101, kInvalidImage = 200,
                     kNotSupported = 801;
constexpr unsigned kHostMallocCoherent = 0x40000000;

int rocmMajor() {
  static const int major = [] {
    const char* v = std::getenv("FAKE_HIP_ROCM_MAJOR");
    return v && std::atoi(v) == 5 ? 5 : 6;
  }();
  return major;
}

std::vector<CUcontext>& primaries() {
  static std::vector<CUcontext> p;
  return p;
}

// hipInit, implicitly at the first call, as the runtime does: the driver, and each device's
// primary context retained for the life of the process.
hipError_t initOnce() {
  static std::once_flag once;
  static CUresult result = CUDA_SUCCESS;
  std::call_once(once, [] {
    if ((result = cuInit(0)) != CUDA_SUCCESS) return;
    int n = 0;
    cuDeviceGetCount(&n);
    for (int i = 0; i < n; i++) {
      CUdevice d = 0;
      CUcontext c = nullptr;
      cuDeviceGet(&d, i);
      cuDevicePrimaryCtxRetain(&c, d);
      primaries().push_back(c);
    }
  });
  return result;
}

// The calling thread's device is current (device 0 until hipSetDevice), as HIP promises.
hipError_t ready() {
  if (hipError_t r = initOnce(); r != kSuccess) return r;
  CUcontext c = nullptr;
  cuCtxGetCurrent(&c);
  if (c != nullptr) return kSuccess;
  if (primaries().empty()) return 100;  // hipErrorNoDevice
  return cuCtxSetCurrent(primaries()[0]);
}

int deviceOfContext(CUcontext c) {
  for (size_t i = 0; i < primaries().size(); i++)
    if (primaries()[i] == c) return static_cast<int>(i);
  return -1;
}

CUdeviceptr dp(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

std::atomic<unsigned long long> gNonCoherent{0};
std::atomic<unsigned long long> gBundleLoads{0};
std::atomic<unsigned long long> gFineGrained{0};

}  // namespace

#pragma GCC visibility push(default)  // exported whatever the build's default visibility
extern "C" {

// ---- runtime, devices ----------------------------------------------------------------------
hipError_t hipInit(unsigned) { return initOnce(); }
hipError_t hipRuntimeGetVersion(int* v) {
  *v = rocmMajor() == 5 ? 50221153 : 60200000;  // major * 10000000 + minor * 100000 + patch
  return kSuccess;
}
hipError_t hipDriverGetVersion(int* v) { return hipRuntimeGetVersion(v); }
const char* hipGetErrorName(hipError_t e) {
  switch (e) {
    case 0: return "hipSuccess";
    case 1: return "hipErrorInvalidValue";
    case 2: return "hipErrorOutOfMemory";
    case 3: return "hipErrorNotInitialized";
    case 100: return "hipErrorNoDevice";
    case 101: return "hipErrorInvalidDevice";
    case 200: return "hipErrorInvalidImage";
    case 201: return "hipErrorInvalidContext";
    case 400: return "hipErrorInvalidHandle";
    case 401: return "hipErrorIllegalState";
    case 500: return "hipErrorNotFound";
    case 600: return "hipErrorNotReady";
    case 700: return "hipErrorIllegalAddress";
    case 704: return "hipErrorPeerAccessAlreadyEnabled";
    case 801: return "hipErrorNotSupported";
    case 900: return "hipErrorStreamCaptureUnsupported";
    case 901: return "hipErrorStreamCaptureInvalidated";
    case 903: return "hipErrorStreamCaptureUnmatched";
    case 905: return "hipErrorStreamCaptureIsolation";
    case 908: return "hipErrorStreamCaptureWrongThread";
  }
  return "hipErrorUnknown";
}
const char* hipGetErrorString(hipError_t e) { return hipGetErrorName(e); }
hipError_t hipGetDeviceCount(int* n) {
  *n = 0;
  if (hipError_t r = initOnce(); r != kSuccess) return r;
  *n = static_cast<int>(primaries().size());
  return *n ? kSuccess : 100;
}
hipError_t hipSetDevice(int d) {
  if (hipError_t r = initOnce(); r != kSuccess) return r;
  if (d < 0 || d >= static_cast<int>(primaries().size())) return kInvalidDevice;
  return cuCtxSetCurrent(primaries()[d]);
}
hipError_t hipGetDevice(int* d) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  CUcontext c = nullptr;
  cuCtxGetCurrent(&c);
  *d = deviceOfContext(c);
  return *d >= 0 ? kSuccess : 201;
}
// The attributes ACCL asks, in hipDeviceAttribute_t's numbering (ROCm 5 and 6 agree on them).
hipError_t hipDeviceGetAttribute(int* v, int attr, int device) {
  if (hipError_t r = initOnce(); r != kSuccess) return r;
  CUdevice d = 0;
  if (cuDeviceGet(&d, device) != CUDA_SUCCESS) return kInvalidDevice;
  switch (attr) {
    case 63: return cuDeviceGetAttribute(v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
    case 4: return cuDeviceGetAttribute(v, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, d);
    case 10013: *v = 1; return kSuccess;  // hipDeviceAttributeCanUseStreamWaitValue
  }
  return kInvalidValue;
}
hipError_t hipDeviceGetPCIBusId(char* bus, int len, int device) {
  if (hipError_t r = initOnce(); r != kSuccess) return r;
  CUdevice d = 0;
  if (cuDeviceGet(&d, device) != CUDA_SUCCESS) return kInvalidDevice;
  return cuDeviceGetPCIBusId(bus, len, d);
}
hipError_t hipDeviceGetUuid(void* uuid, int device) {
  if (hipError_t r = initOnce(); r != kSuccess) return r;
  CUdevice d = 0;
  if (cuDeviceGet(&d, device) != CUDA_SUCCESS) return kInvalidDevice;
  return cuDeviceGetUuid(static_cast<CUuuid*>(uuid), d);
}
// Bound by the loader (ROCm 6's name), never called by ACCL: the struct is not emulated.
hipError_t hipGetDevicePropertiesR0600(void*, int) { return kNotSupported; }
hipError_t hipDeviceCanAccessPeer(int* can, int device, int peer) {
  if (hipError_t r = initOnce(); r != kSuccess) return r;
  CUdevice a = 0, b = 0;
  if (cuDeviceGet(&a, device) != CUDA_SUCCESS || cuDeviceGet(&b, peer) != CUDA_SUCCESS) return kInvalidDevice;
  return cuDeviceCanAccessPeer(can, a, b);
}
hipError_t hipDeviceEnablePeerAccess(int peer, unsigned flags) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  if (flags != 0 || peer < 0 || peer >= static_cast<int>(primaries().size())) return kInvalidValue;
  return cuCtxEnablePeerAccess(primaries()[peer], 0);
}
hipError_t hipDeviceSynchronize() {
  if (hipError_t r = ready(); r != kSuccess) return r;
  return cuCtxSynchronize();
}

// ---- kernels -------------------------------------------------------------------------------
hipError_t hipModuleLoadData(void** module, const void* image) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  static const char kMagic[] = "__CLANG_OFFLOAD_BUNDLE__";
  if (image == nullptr || std::memcmp(image, kMagic, sizeof(kMagic) - 1) != 0) {
    std::fprintf(stderr, "fake libamdhip64: hipModuleLoadData: the image is not a clang offload bundle (no %s "
                 "magic): hipErrorInvalidImage\n", kMagic);
    return kInvalidImage;
  }
  gBundleLoads++;
  return cuModuleLoadData(reinterpret_cast<CUmodule*>(module), image);
}
hipError_t hipModuleGetFunction(void** fn, void* module, const char* name) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  return cuModuleGetFunction(reinterpret_cast<CUfunction*>(fn), static_cast<CUmodule>(module), name);
}
hipError_t hipModuleLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  return cuLaunchKernel(static_cast<CUfunction>(fn), gx, gy, gz, bx, by, bz, shared, s, params, extra);
}
hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void* fn, int blockSize, size_t shared) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  return cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, static_cast<CUfunction>(fn), blockSize, shared);
}

// ---- streams, events, capture --------------------------------------------------------------
hipError_t hipStreamCreateWithFlags(CUstream* s, unsigned flags) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  return cuStreamCreate(s, flags);  // hipStreamNonBlocking is CU_STREAM_NON_BLOCKING (1)
}
hipError_t hipStreamCreate(CUstream* s) { return hipStreamCreateWithFlags(s, 0); }
hipError_t hipStreamDestroy(CUstream s) { return ready() ? ready() : cuStreamDestroy(s); }
hipError_t hipStreamSynchronize(CUstream s) { return ready() ? ready() : cuStreamSynchronize(s); }
hipError_t hipStreamQuery(CUstream s) { return ready() ? ready() : cuStreamQuery(s); }
hipError_t hipStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  return ready() ? ready() : cuStreamWaitEvent(s, e, flags);
}
hipError_t hipStreamIsCapturing(CUstream s, int* status) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = cuStreamIsCapturing(s, &st);
  *status = static_cast<int>(st);
  return r;
}
hipError_t hipStreamGetDevice(CUstream s, int* device) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  CUcontext c = nullptr;
  if (CUresult r = cuStreamGetCtx(s, &c); r != CUDA_SUCCESS) return r;
  *device = deviceOfContext(c);
  return *device >= 0 ? kSuccess : 400;
}
hipError_t hipThreadExchangeStreamCaptureMode(int* mode) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  CUstreamCaptureMode m = static_cast<CUstreamCaptureMode>(*mode);
  const CUresult r = cuThreadExchangeStreamCaptureMode(&m);
  *mode = static_cast<int>(m);
  return r;
}
hipError_t hipStreamBeginCapture(CUstream s, int mode) {
  return ready() ? ready() : cuStreamBeginCapture(s, static_cast<CUstreamCaptureMode>(mode));
}
hipError_t hipStreamEndCapture(CUstream s, CUgraph* graph) { return ready() ? ready() : cuStreamEndCapture(s, graph); }
hipError_t hipGraphInstantiate(CUgraphExec* exec, CUgraph graph, void*, char*, size_t) {
  return ready() ? ready() : cuGraphInstantiateWithFlags(exec, graph, 0);
}
hipError_t hipGraphLaunch(CUgraphExec exec, CUstream s) { return ready() ? ready() : cuGraphLaunch(exec, s); }
hipError_t hipGraphExecDestroy(CUgraphExec exec) { return ready() ? ready() : cuGraphExecDestroy(exec); }
hipError_t hipGraphDestroy(CUgraph graph) { return ready() ? ready() : cuGraphDestroy(graph); }
// HIP compares (*ptr & mask) with the value: only the full mask is emulated.
hipError_t hipStreamWaitValue64(CUstream s, void* ptr, uint64_t value, unsigned flags, uint64_t mask) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  if (mask != ~uint64_t{0}) return kNotSupported;
  if (flags > 1) return kInvalidValue;  // hipStreamWaitValueGte 0, Eq 1
  return cuStreamWaitValue64(s, dp(ptr), value, flags == 0 ? CU_STREAM_WAIT_VALUE_GEQ : CU_STREAM_WAIT_VALUE_EQ);
}
hipError_t hipStreamWriteValue64(CUstream s, void* ptr, uint64_t value, unsigned) {
  return ready() ? ready() : cuStreamWriteValue64(s, dp(ptr), value, 0);
}
hipError_t hipLaunchHostFunc(CUstream s, void (*fn)(void*), void* arg) {
  return ready() ? ready() : cuLaunchHostFunc(s, fn, arg);
}
hipError_t hipEventCreateWithFlags(CUevent* e, unsigned flags) { return ready() ? ready() : cuEventCreate(e, flags); }
hipError_t hipEventCreate(CUevent* e) { return hipEventCreateWithFlags(e, 0); }
hipError_t hipEventRecord(CUevent e, CUstream s) { return ready() ? ready() : cuEventRecord(e, s); }
hipError_t hipEventQuery(CUevent e) { return ready() ? ready() : cuEventQuery(e); }
hipError_t hipEventSynchronize(CUevent e) { return ready() ? ready() : cuEventSynchronize(e); }
hipError_t hipEventDestroy(CUevent e) { return ready() ? ready() : cuEventDestroy(e); }

// ---- memory --------------------------------------------------------------------------------
hipError_t hipMalloc(void** p, size_t bytes) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  CUdeviceptr d = 0;
  const CUresult r = cuMemAlloc(&d, bytes ? bytes : 1);
  *p = reinterpret_cast<void*>(d);
  return r;
}
// hipDeviceMallocFinegrained (1) allocations are counted: where the HIP backend puts what
// kernels of several devices poll. The core's memory is the same either way.
hipError_t hipExtMallocWithFlags(void** p, size_t bytes, unsigned flags) {
  if (flags == 0x1) gFineGrained++;
  return hipMalloc(p, bytes);
}
hipError_t hipFree(void* p) {
  if (p == nullptr) return kSuccess;
  return ready() ? ready() : cuMemFree(dp(p));
}
hipError_t hipMallocAsync(void** p, size_t bytes, CUstream s) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  CUdeviceptr d = 0;
  const CUresult r = cuMemAllocAsync(&d, bytes ? bytes : 1, s);
  *p = reinterpret_cast<void*>(d);
  return r;
}
hipError_t hipFreeAsync(void* p, CUstream s) { return ready() ? ready() : cuMemFreeAsync(dp(p), s); }
hipError_t hipHostMalloc(void** p, size_t bytes, unsigned flags) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  if (!(flags & kHostMallocCoherent)) gNonCoherent++;
  return cuMemHostAlloc(p, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
}
hipError_t hipHostFree(void* p) { return ready() ? ready() : cuMemFreeHost(p); }
// hipHostRegisterPortable 1 and hipHostRegisterMapped 2 are CUDA's bits.
hipError_t hipHostRegister(void* p, size_t bytes, unsigned flags) {
  return ready() ? ready() : cuMemHostRegister(p, bytes, flags & 3u);
}
hipError_t hipHostUnregister(void* p) { return ready() ? ready() : cuMemHostUnregister(p); }
hipError_t hipHostGetDevicePointer(void** d, void* p, unsigned) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  CUdeviceptr q = 0;
  const CUresult r = cuMemHostGetDevicePointer(&q, p, 0);
  *d = reinterpret_cast<void*>(q);
  return r;
}
hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, int, CUstream s) {
  return ready() ? ready() : cuMemcpyAsync(dp(dst), dp(src), bytes, s);
}
hipError_t hipMemsetD8Async(void* dst, unsigned char value, size_t bytes, CUstream s) {
  return ready() ? ready() : cuMemsetD8Async(dp(dst), value, bytes, s);
}
hipError_t hipMemGetAddressRange(void** base, size_t* size, void* p) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  CUdeviceptr b = 0;
  const CUresult r = cuMemGetAddressRange(&b, size, dp(p));
  if (base) *base = reinterpret_cast<void*>(b);
  return r;
}

// hipPointerAttribute_t: the same layout in ROCm 5 and 6, the type's numbering differs.
struct PointerAttributes {
  int type;
  int device;
  void* devicePointer;
  void* hostPointer;
  int isManaged;
  unsigned allocationFlags;
};
hipError_t hipPointerGetAttributes(PointerAttributes* a, const void* p) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  std::memset(a, 0, sizeof(*a));
  unsigned type = 0;
  if (cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp(p)) != CUDA_SUCCESS) {
    if (rocmMajor() == 5) return kInvalidValue;  // memory HIP does not know
    a->type = 0;  // hipMemoryTypeUnregistered
    a->device = -1;
    a->hostPointer = const_cast<void*>(p);
    return kSuccess;
  }
  const bool host = type == CU_MEMORYTYPE_HOST;
  a->type = rocmMajor() == 5 ? (host ? 0 : 1) : (host ? 1 : 2);
  int ordinal = 0;
  cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dp(p));
  a->device = ordinal;
  (host ? a->hostPointer : a->devicePointer) = const_cast<void*>(p);
  return kSuccess;
}

// A handle names the allocation p lies in; opening it maps that allocation's base (HIP's rule,
// not CUDA's): a process that exported an interior pointer would read the wrong bytes.
struct IpcMemHandle {
  char reserved[64];
};
hipError_t hipIpcGetMemHandle(IpcMemHandle* h, void* p) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (CUresult r = cuMemGetAddressRange(&base, &size, dp(p)); r != CUDA_SUCCESS) return r;
  static_assert(sizeof(CUipcMemHandle) == sizeof(IpcMemHandle));
  return cuIpcGetMemHandle(reinterpret_cast<CUipcMemHandle*>(h), base);
}
hipError_t hipIpcOpenMemHandle(void** p, IpcMemHandle h, unsigned flags) {
  if (hipError_t r = ready(); r != kSuccess) return r;
  const unsigned lazy = rocmMajor() == 5 ? 0u : 1u;  // hipIpcMemLazyEnablePeerAccess of that release
  if (flags != lazy) {
    std::fprintf(stderr, "fake libamdhip64: hipIpcOpenMemHandle: flags %u are not hipIpcMemLazyEnablePeerAccess (%u "
                 "in ROCm %d): hipErrorInvalidValue\n", flags, lazy, rocmMajor());
    return kInvalidValue;
  }
  CUipcMemHandle ch;
  std::memcpy(&ch, &h, sizeof(ch));
  CUdeviceptr d = 0;
  const CUresult r = cuIpcOpenMemHandle(&d, ch, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  *p = reinterpret_cast<void*>(d);
  return r;
}
hipError_t hipIpcCloseMemHandle(void* p) { return ready() ? ready() : cuIpcCloseMemHandle(dp(p)); }

// ---- test hooks ----------------------------------------------------------------------------
int fakeHipIsFake(void) { return 1; }
int fakeHipRocmMajor(void) { return rocmMajor(); }
unsigned long long fakeHipNonCoherentHostAllocs(void) { return gNonCoherent.load(); }
unsigned long long fakeHipBundleLoads(void) { return gBundleLoads.load(); }
unsigned long long fakeHipFineGrainedAllocs(void) { return gFineGrained.load(); }

}  // extern "C"
#pragma GCC visibility pop
