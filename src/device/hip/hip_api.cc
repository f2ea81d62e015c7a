#include "device/hip/hip_api.h"
#include <dlfcn.h>
#include <mutex>
#include <utility>

namespace accl::dev::hip {
namespace {

struct Table {
  HipApi api;
  std::vector<SymbolBinding> bindings;
  std::vector<void**> slots;  // bindings[i] fills *slots[i]
};

template <class Fn>
void add(Table& t, Fn* slot, std::vector<std::string> names, const char* whyOptional = nullptr) {
  SymbolBinding b;
  b.names = std::move(names);
  b.optional = whyOptional != nullptr;
  if (whyOptional) b.whyOptional = whyOptional;
  t.bindings.push_back(std::move(b));
  t.slots.push_back(reinterpret_cast<void**>(slot));
}

// Every entry point, in the order of hip_api.h. Renamed entry points list the new name first:
// under ROCm 6 the old name still resolves, to the old struct layout.
void describe(Table& t) {
  HipApi& a = t.api;
  add(t, &a.init, {"hipInit"});
  add(t, &a.runtimeGetVersion, {"hipRuntimeGetVersion"});
  add(t, &a.driverGetVersion, {"hipDriverGetVersion"});
  add(t, &a.getErrorName, {"hipGetErrorName"});
  add(t, &a.getErrorString, {"hipGetErrorString"});
  add(t, &a.getDeviceCount, {"hipGetDeviceCount"});
  add(t, &a.getDevice, {"hipGetDevice"});
  add(t, &a.setDevice, {"hipSetDevice"});
  add(t, &a.deviceGetAttribute, {"hipDeviceGetAttribute"});
  add(t, &a.deviceGetPCIBusId, {"hipDeviceGetPCIBusId"});
  add(t, &a.getDeviceProperties, {"hipGetDevicePropertiesR0600", "hipGetDeviceProperties"});
  add(t, &a.deviceCanAccessPeer, {"hipDeviceCanAccessPeer"});
  add(t, &a.deviceEnablePeerAccess, {"hipDeviceEnablePeerAccess"});
  add(t, &a.deviceSynchronize, {"hipDeviceSynchronize"});
  add(t, &a.deviceGetUuid, {"hipDeviceGetUuid"});
  add(t, &a.moduleLoadData, {"hipModuleLoadData"});
  add(t, &a.moduleGetFunction, {"hipModuleGetFunction"});
  add(t, &a.moduleLaunchKernel, {"hipModuleLaunchKernel"});
  add(t, &a.moduleOccupancyMaxActiveBlocksPerMultiprocessor, {"hipModuleOccupancyMaxActiveBlocksPerMultiprocessor"});
  add(t, &a.streamCreateWithFlags, {"hipStreamCreateWithFlags"});
  add(t, &a.streamDestroy, {"hipStreamDestroy"});
  add(t, &a.streamSynchronize, {"hipStreamSynchronize"});
  add(t, &a.streamQuery, {"hipStreamQuery"});
  add(t, &a.streamWaitEvent, {"hipStreamWaitEvent"});
  add(t, &a.streamIsCapturing, {"hipStreamIsCapturing"});
  add(t, &a.streamGetDevice, {"hipStreamGetDevice"},
      "not in ROCm 5.2: a stream of another device is then not refused by name (its launches fail instead)");
  add(t, &a.threadExchangeStreamCaptureMode, {"hipThreadExchangeStreamCaptureMode"});
  add(t, &a.eventCreateWithFlags, {"hipEventCreateWithFlags"});
  add(t, &a.eventRecord, {"hipEventRecord"});
  add(t, &a.eventQuery, {"hipEventQuery"});
  add(t, &a.eventDestroy, {"hipEventDestroy"});
  add(t, &a.malloc, {"hipMalloc"});
  add(t, &a.extMallocWithFlags, {"hipExtMallocWithFlags"});
  add(t, &a.free, {"hipFree"});
  add(t, &a.hostMalloc, {"hipHostMalloc"});
  add(t, &a.hostFree, {"hipHostFree"});
  add(t, &a.hostRegister, {"hipHostRegister"});
  add(t, &a.hostUnregister, {"hipHostUnregister"});
  add(t, &a.hostGetDevicePointer, {"hipHostGetDevicePointer"});
  add(t, &a.memcpyAsync, {"hipMemcpyAsync"});
  add(t, &a.memsetD8Async, {"hipMemsetD8Async"});
  add(t, &a.memGetAddressRange, {"hipMemGetAddressRange"});
  add(t, &a.pointerGetAttributes, {"hipPointerGetAttributes"});
  add(t, &a.ipcGetMemHandle, {"hipIpcGetMemHandle"});
  add(t, &a.ipcOpenMemHandle, {"hipIpcOpenMemHandle"});
  add(t, &a.ipcCloseMemHandle, {"hipIpcCloseMemHandle"});
}

Table& table() {
  static Table t = [] {
    Table x;
    describe(x);
    return x;
  }();
  return t;
}

const HipApi* load(std::string* why) {
  Table& t = table();
  // Never dlclose'd: the runtime stays for the life of the process, as a linked one would.
  void* lib = nullptr;
  std::string tried;
  for (const std::string& name : hipSonames()) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      t.api.soname = name;
      break;
    }
    const char* err = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(err ? err : name + " not found");
  }
  if (lib == nullptr) {
    *why = "no HIP runtime (" + tried + ")";
    return nullptr;
  }
  std::string missing;
  for (size_t i = 0; i < t.bindings.size(); ++i) {
    SymbolBinding& b = t.bindings[i];
    for (const std::string& name : b.names) {
      if (void* p = dlsym(lib, name.c_str())) {
        b.bound = name;
        b.address = p;
        break;
      }
    }
    *t.slots[i] = b.address;
    if (b.address == nullptr && !b.optional && missing.empty()) missing = b.names.front();
  }
  if (!missing.empty()) {
    *why = t.api.soname + " lacks " + missing + " (too old?)";
    return nullptr;
  }
  int version = 0;
  if (t.api.runtimeGetVersion(&version) != kSuccess || version <= 0) {
    *why = t.api.soname + ": hipRuntimeGetVersion failed";
    return nullptr;
  }
  t.api.runtimeVersion = version;
  t.api.runtimeMajor = version / 10000000;
  for (const SymbolBinding& b : t.bindings)
    if (b.bound == "hipGetDevicePropertiesR0600") t.api.propertiesLayout = 600;
  return &t.api;
}

}  // namespace

const std::vector<std::string>& hipSonames() {
  static const std::vector<std::string> names = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"};
  return names;
}

const HipApi* loadHipRuntime(std::string* why) {
  static std::once_flag once;
  static const HipApi* api = nullptr;
  static std::string reason;
  std::call_once(once, [] { api = load(&reason); });
  if (api == nullptr && why) *why = reason;
  return api;
}

const std::vector<SymbolBinding>& hipBindings() { return table().bindings; }

std::string errorText(const HipApi& api, hipError_t r) {
  const char* name = api.getErrorName ? api.getErrorName(r) : nullptr;
  return std::string(name ? name : "error") + " (" + std::to_string(r) + ")";
}

int probeDevices(const HipApi& api, std::string* why) {
  // Without a GPU hipInit fails (5.2: hipErrorInvalidDevice) and hipGetDeviceCount says
  // hipErrorNoDevice with a count of 0: both go into the reason.
  const hipError_t initResult = api.init(0);
  int count = 0;
  const hipError_t countResult = api.getDeviceCount(&count);
  if (initResult == kSuccess && countResult == kSuccess && count > 0) return count;
  std::string r = "no AMD GPU visible to " + api.soname + " (hipInit: " + errorText(api, initResult) +
                  ", hipGetDeviceCount: " + errorText(api, countResult) + ", count " + std::to_string(count) + ")";
  if (why) *why = r;
  return 0;
}

MemoryKind memoryKind(int type, int runtimeMajor) {
  if (runtimeMajor < 6) {
    // ROCm 5's hipMemoryType: host, device, array, unified (from 0); unregistered host memory
    // is an error of hipPointerGetAttributes, not a value.
    switch (type) {
      case 0: return MemoryKind::Host;
      case 1: return MemoryKind::Device;
      case 2: return MemoryKind::Array;
      case 3: return MemoryKind::Unified;
      default: return MemoryKind::Unknown;
    }
  }
  // ROCm 6 and later follow CUDA's cudaMemoryType, with AMD's own values above.
  switch (type) {
    case 0: return MemoryKind::Unregistered;
    case 1: return MemoryKind::Host;
    case 2: return MemoryKind::Device;
    case 3: return MemoryKind::Managed;
    case 10: return MemoryKind::Array;
    case 11: return MemoryKind::Unified;
    default: return MemoryKind::Unknown;
  }
}

}  // namespace accl::dev::hip
