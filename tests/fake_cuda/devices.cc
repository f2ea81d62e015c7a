// devices.cc: cuInit, the devices (FAKE_CUDA_DEVICES, an H100/H200-like sm_90 part), their
// primary contexts and the calling thread's current context.
#include <pthread.h>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "internal.h"

namespace fakecuda {
namespace {

constexpr int kMaxDevices = 32;  // more than a host has, so that tests can give each of 17+ ranks its own
std::atomic<bool> gInitialized{false};
// A child forked after cuInit cannot use the driver (the real one answers
// CUDA_ERROR_NOT_INITIALIZED there); without this the child would wait forever on stream
// threads that fork did not copy.
std::atomic<bool> gForkedAfterInit{false};
thread_local Context* tCurrent = nullptr;         // the top of the thread's context stack
thread_local std::vector<Context*> tBelow;        // the rest of it (cuCtxPushCurrent)

struct DeviceTable {
  std::mutex mu;
  int count = 1;
  Context contexts[kMaxDevices];
  bool peerEnabled[kMaxDevices][kMaxDevices] = {};  // [from][to], guarded by mu
  DeviceTable() {
    const char* env = std::getenv("FAKE_CUDA_DEVICES");
    if (env && *env) count = std::atoi(env);
    if (count < 0) count = 0;
    if (count > kMaxDevices) count = kMaxDevices;
    for (int i = 0; i < kMaxDevices; i++) contexts[i].device = i;
  }
};

// Never destroyed: stream threads may still ask at process exit.
DeviceTable& table() {
  static DeviceTable* t = new DeviceTable;
  return *t;
}

CUresult checkDevice(CUdevice dev) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

// FAKE_CUDA_SMS: a smaller part than the default H100/H200-like 132 SMs.
int multiprocessors() {
  static const int sms = [] {
    const char* env = std::getenv("FAKE_CUDA_SMS");
    const int v = env ? std::atoi(env) : 0;
    return v > 0 ? v : 132;
  }();
  return sms;
}

int attribute(CUdevice_attribute a) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return multiprocessors();
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    default: return 0;
  }
}

}  // namespace

bool initialized() { return gInitialized.load(std::memory_order_acquire) && !gForkedAfterInit.load(); }
int deviceCount() { return table().count; }
Context* primaryContext(int device) { return &table().contexts[device]; }

bool isContext(CUcontext c) {
  Context* p = asContext(c);
  Context* first = table().contexts;
  return p >= first && p < first + deviceCount();
}

CUresult currentContext(Context** out) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (tCurrent == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *out = tCurrent;
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

using namespace fakecuda;

FAKE_CUDA_API CUresult cuInit(unsigned int flags) {
  noteCall("cuInit");
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (gForkedAfterInit) {
    report("cuInit in a process forked after its parent initialized CUDA: not supported (as with the real driver)");
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  static std::once_flag atfork;
  std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, [] { gForkedAfterInit = true; }); });
  table();
  gInitialized.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuDriverGetVersion(int* version) {
  noteCall("cuDriverGetVersion");
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuDeviceGetCount(int* count) {
  noteCall("cuDeviceGetCount");
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  *count = deviceCount();
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  noteCall("cuDeviceGet");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(ordinal)) return r;
  *device = ordinal;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
  noteCall("cuDeviceGetAttribute");
  if (value == nullptr || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(dev)) return r;
  *value = attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID ? dev : attribute(attrib);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  noteCall("cuDeviceGetName");
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(dev)) return r;
  snprintf(name, static_cast<size_t>(len), "ACCL fake CUDA device %d", dev);
  return CUDA_SUCCESS;
}

// "0000:<bus>:00.0" with the bus number = the ordinal: distinct per device, stable across runs.
FAKE_CUDA_API CUresult cuDeviceGetPCIBusId(char* busId, int len, CUdevice dev) {
  noteCall("cuDeviceGetPCIBusId");
  if (busId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(dev)) return r;
  snprintf(busId, static_cast<size_t>(len), "0000:%02x:00.0", dev);
  return CUDA_SUCCESS;
}

// The same bytes in every process for one ordinal: it is the same "GPU".
static CUresult deviceUuid(CUuuid* uuid, CUdevice dev) {
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(dev)) return r;
  static const char kTag[] = "ACCL-fakeGPU";  // 12 bytes + 4 for the ordinal
  std::memcpy(uuid->bytes, kTag, 12);
  for (int i = 0; i < 4; i++) uuid->bytes[12 + i] = static_cast<char>((dev >> (8 * (3 - i))) & 0xff);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) { noteCall("cuDeviceGetUuid_v2"); return deviceUuid(uuid, dev); }
#undef cuDeviceGetUuid
FAKE_CUDA_API CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) { noteCall("cuDeviceGetUuid"); return deviceUuid(uuid, dev); }

FAKE_CUDA_API CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  noteCall("cuDevicePrimaryCtxRetain");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(dev)) return r;
  std::lock_guard<std::mutex> g(table().mu);
  Context* c = primaryContext(dev);
  c->retains++;
  *pctx = asHandle(c);
  return CUDA_SUCCESS;
}

// The context (and its memory) outlives its last release here: tests may release early.
FAKE_CUDA_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  noteCall("cuDevicePrimaryCtxRelease_v2");
  if (CUresult r = checkDevice(dev)) return r;
  std::lock_guard<std::mutex> g(table().mu);
  Context* c = primaryContext(dev);
  if (c->retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  c->retains--;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  noteCall("cuCtxSetCurrent");
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx != nullptr && !isContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  tCurrent = asContext(ctx);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuCtxGetCurrent(CUcontext* pctx) {
  noteCall("cuCtxGetCurrent");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  *pctx = asHandle(tCurrent);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuCtxGetDevice(CUdevice* device) {
  noteCall("cuCtxGetDevice");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* c = nullptr;
  if (CUresult r = currentContext(&c)) return r;
  *device = c->device;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuCtxSynchronize() {
  noteCall("cuCtxSynchronize");
  Context* c = nullptr;
  if (CUresult r = currentContext(&c)) return r;
  return synchronizeContext(c);
}

FAKE_CUDA_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  noteCall("cuCtxPushCurrent_v2");
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!isContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  tBelow.push_back(tCurrent);
  tCurrent = asContext(ctx);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  noteCall("cuCtxPopCurrent_v2");
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (tCurrent == nullptr && tBelow.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = asHandle(tCurrent);
  tCurrent = tBelow.empty() ? nullptr : tBelow.back();
  if (!tBelow.empty()) tBelow.pop_back();
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  noteCall("cuDevicePrimaryCtxGetState");
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(dev)) return r;
  std::lock_guard<std::mutex> g(table().mu);
  *flags = 0;
  *active = primaryContext(dev)->retains > 0;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  noteCall("cuDeviceTotalMem_v2");
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(dev)) return r;
  *bytes = deviceMemoryBytes();
  return CUDA_SUCCESS;
}

// FAKE_CUDA_NO_P2P="3" or "0,2": devices without peer access to any other device (GPUs on
// PCIe behind different root complexes, or a board without P2P); read once.
static bool isolated(CUdevice dev) {
  static const std::vector<int> list = [] {
    std::vector<int> v;
    const char* env = std::getenv("FAKE_CUDA_NO_P2P");
    for (const char* p = env; p && *p;) {
      char* end = nullptr;
      const long d = std::strtol(p, &end, 10);
      if (end == p) break;
      v.push_back(static_cast<int>(d));
      p = *end == ',' ? end + 1 : end;
    }
    return v;
  }();
  return std::find(list.begin(), list.end(), static_cast<int>(dev)) != list.end();
}

// Every device of the fake reaches every other's memory (one host), except the isolated ones;
// a device is not its own peer.
FAKE_CUDA_API CUresult cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  noteCall("cuDeviceCanAccessPeer");
  if (canAccessPeer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(dev)) return r;
  if (CUresult r = checkDevice(peerDev)) return r;
  *canAccessPeer = dev != peerDev && !isolated(dev) && !isolated(peerDev);
  return CUDA_SUCCESS;
}

// Recorded, not enforced: kernels reach peer memory whether or not access was enabled.
FAKE_CUDA_API CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int flags) {
  noteCall("cuCtxEnablePeerAccess");
  Context* c = nullptr;
  if (CUresult r = currentContext(&c)) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!isContext(peerContext)) return CUDA_ERROR_INVALID_CONTEXT;
  const int peer = asContext(peerContext)->device;
  if (peer == c->device) return CUDA_ERROR_INVALID_DEVICE;
  if (isolated(peer) || isolated(c->device)) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  std::lock_guard<std::mutex> g(table().mu);
  bool& on = table().peerEnabled[c->device][peer];
  if (on) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  on = true;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuCtxDisablePeerAccess(CUcontext peerContext) {
  noteCall("cuCtxDisablePeerAccess");
  Context* c = nullptr;
  if (CUresult r = currentContext(&c)) return r;
  if (!isContext(peerContext)) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> g(table().mu);
  bool& on = table().peerEnabled[c->device][asContext(peerContext)->device];
  if (!on) return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  on = false;
  return CUDA_SUCCESS;
}
