// hip_api.h: the part of ROCm's HIP runtime (libamdhip64) a HIP backend uses, as a table of
// function pointers filled at first use with dlopen/dlsym, like the CUDA driver table
// (device/cuda/driver_api.h): libnccl.so.2 links nothing ROCm and loads where there is none.
// The few types and values are declared here (they are the runtime's ABI; each says which
// hip_runtime_api.h it was read from), so the library builds without ROCm's headers.
//
// What changes between ROCm releases is decided here, at binding time:
//   - the soname: libamdhip64.so.7, .so.6, .so.5, newest first;
//   - ROCm 6 renamed entry points whose struct changed and kept the old name for old binaries
//     (hipGetDeviceProperties is hipGetDevicePropertiesR0600 in 6's headers): each such entry
//     lists its names newest first, and the table records which one it got;
//   - hipPointerGetAttributes' memory-type values (5: host 0, device 1; 6 and later: CUDA's
//     numbering, unregistered 0, host 1, device 2): memoryKind() reads them by the runtime's major;
//   - entry points a release lacks (hipLaunchHostFunc is not in 5.2) are optional, each with why.
// The HIP backend drives this table through device/hip/hip_driver.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace accl::dev::hip {

using hipError_t = int;
struct ihipStream_t;
using hipStream_t = ihipStream_t*;
struct ihipModule_t;
using hipModule_t = ihipModule_t*;
struct ihipModuleSymbol_t;
using hipFunction_t = ihipModuleSymbol_t*;
struct ihipEvent_t;
using hipEvent_t = ihipEvent_t*;
// hipIpcMemHandle_t: HIP_IPC_HANDLE_SIZE (64) bytes, passed by value.
struct IpcMemHandle {
  char reserved[64];
};
// hipPointerAttribute_t: the same layout in 5.2 (first field "memoryType") and 6 ("type").
struct PointerAttributes {
  int type = 0;
  int device = 0;
  void* devicePointer = nullptr;
  void* hostPointer = nullptr;
  int isManaged = 0;
  unsigned allocationFlags = 0;
};

// hipError_t values (5.2's hip_runtime_api.h; unchanged since).
inline constexpr hipError_t kSuccess = 0;
inline constexpr hipError_t kErrorNoDevice = 100;       // hipErrorNoDevice
inline constexpr hipError_t kErrorInvalidDevice = 101;  // hipErrorInvalidDevice (hipInit without a GPU)
inline constexpr hipError_t kErrorNotReady = 600;       // hipErrorNotReady
// Flags (5.2's hip_runtime_api.h).
inline constexpr unsigned kStreamNonBlocking = 0x1;          // hipStreamNonBlocking
inline constexpr unsigned kEventDisableTiming = 0x2;         // hipEventDisableTiming
inline constexpr unsigned kHostMallocCoherent = 0x40000000;  // hipHostMallocCoherent: flags the host and GPUs poll
inline constexpr unsigned kDeviceMallocFinegrained = 0x1;    // hipDeviceMallocFinegrained (hipExtMallocWithFlags)
inline constexpr unsigned kHostMallocPortable = 0x1;         // hipHostMallocPortable
inline constexpr unsigned kHostMallocMapped = 0x2;           // hipHostMallocMapped
inline constexpr int kMemcpyDefault = 4;                     // hipMemcpyDefault: direction from the pointers
// hipIpcMemLazyEnablePeerAccess: 0 in ROCm 5's hip_runtime_api.h, 0x01 in 6's (the runtime
// compares the flags with its own value).
inline constexpr unsigned kIpcMemLazyEnablePeerAccess5 = 0x0;
inline constexpr unsigned kIpcMemLazyEnablePeerAccess6 = 0x1;
// hipDeviceAttribute_t: the same values in ROCm 5's and 6's hip_runtime_api.h (CUDA-compatible
// attributes from 0 in alphabetical order, AMD's own from 10000).
inline constexpr int kAttrCanUseHostPointerForRegisteredMem = 4;  // hipDeviceAttributeCanUseHostPointerForRegisteredMem
inline constexpr int kAttrMultiprocessorCount = 63;               // hipDeviceAttributeMultiprocessorCount
// hipStreamCaptureStatus and hipStreamCaptureMode: CUDA's values.
inline constexpr int kErrorPeerAccessAlreadyEnabled = 704;  // hipErrorPeerAccessAlreadyEnabled

struct HipApi {
  hipError_t (*init)(unsigned flags) = nullptr;                            // hipInit
  hipError_t (*runtimeGetVersion)(int* version) = nullptr;                 // hipRuntimeGetVersion
  hipError_t (*driverGetVersion)(int* version) = nullptr;                  // hipDriverGetVersion
  const char* (*getErrorName)(hipError_t error) = nullptr;                 // hipGetErrorName
  const char* (*getErrorString)(hipError_t error) = nullptr;               // hipGetErrorString
  hipError_t (*getDeviceCount)(int* count) = nullptr;                      // hipGetDeviceCount
  hipError_t (*getDevice)(int* device) = nullptr;                          // hipGetDevice
  hipError_t (*setDevice)(int device) = nullptr;                           // hipSetDevice
  hipError_t (*deviceGetAttribute)(int* value, int attribute, int device) = nullptr;  // hipDeviceGetAttribute
  hipError_t (*deviceGetPCIBusId)(char* busId, int len, int device) = nullptr;        // hipDeviceGetPCIBusId
  // hipDeviceProp_t of the layout propertiesLayout names (the struct itself is not declared:
  // the backend reads device facts with deviceGetAttribute).
  hipError_t (*getDeviceProperties)(void* props, int device) = nullptr;  // hipGetDevicePropertiesR0600 | hipGetDeviceProperties
  hipError_t (*deviceCanAccessPeer)(int* can, int device, int peer) = nullptr;  // hipDeviceCanAccessPeer
  hipError_t (*deviceEnablePeerAccess)(int peer, unsigned flags) = nullptr;     // hipDeviceEnablePeerAccess
  hipError_t (*deviceSynchronize)() = nullptr;                                  // hipDeviceSynchronize
  hipError_t (*deviceGetUuid)(void* uuid16, int device) = nullptr;              // hipDeviceGetUuid (hipUUID: 16 bytes)
  // Kernels: the embedded offload bundle (device/hip/kernel_bundle.h).
  hipError_t (*moduleLoadData)(hipModule_t* module, const void* image) = nullptr;             // hipModuleLoadData
  hipError_t (*moduleGetFunction)(hipFunction_t* fn, hipModule_t module, const char* name) = nullptr;  // hipModuleGetFunction
  hipError_t (*moduleLaunchKernel)(hipFunction_t fn, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                                   unsigned blockY, unsigned blockZ, unsigned sharedBytes, hipStream_t stream,
                                   void** params, void** extra) = nullptr;  // hipModuleLaunchKernel
  hipError_t (*moduleOccupancyMaxActiveBlocksPerMultiprocessor)(int* blocks, hipFunction_t fn, int blockSize,
                                                                size_t dynamicSharedBytes) = nullptr;
  // Streams, events, capture.
  hipError_t (*streamCreateWithFlags)(hipStream_t* stream, unsigned flags) = nullptr;  // hipStreamCreateWithFlags
  hipError_t (*streamDestroy)(hipStream_t stream) = nullptr;                           // hipStreamDestroy
  hipError_t (*streamSynchronize)(hipStream_t stream) = nullptr;                       // hipStreamSynchronize
  hipError_t (*streamQuery)(hipStream_t stream) = nullptr;                             // hipStreamQuery
  hipError_t (*streamWaitEvent)(hipStream_t stream, hipEvent_t event, unsigned flags) = nullptr;  // hipStreamWaitEvent
  hipError_t (*streamIsCapturing)(hipStream_t stream, int* status) = nullptr;                    // hipStreamIsCapturing
  // Which device a stream belongs to (optional: not in ROCm 5.2; a backend then cannot refuse
  // another device's stream by name).
  hipError_t (*streamGetDevice)(hipStream_t stream, int* device) = nullptr;  // hipStreamGetDevice
  hipError_t (*threadExchangeStreamCaptureMode)(int* mode) = nullptr;  // hipThreadExchangeStreamCaptureMode
  hipError_t (*eventCreateWithFlags)(hipEvent_t* event, unsigned flags) = nullptr;  // hipEventCreateWithFlags
  hipError_t (*eventRecord)(hipEvent_t event, hipStream_t stream) = nullptr;        // hipEventRecord
  hipError_t (*eventQuery)(hipEvent_t event) = nullptr;                             // hipEventQuery
  hipError_t (*eventDestroy)(hipEvent_t event) = nullptr;                           // hipEventDestroy
  // Memory.
  hipError_t (*malloc)(void** ptr, size_t bytes) = nullptr;                                  // hipMalloc
  hipError_t (*extMallocWithFlags)(void** ptr, size_t bytes, unsigned flags) = nullptr;      // hipExtMallocWithFlags
  hipError_t (*free)(void* ptr) = nullptr;                                                   // hipFree
  hipError_t (*hostMalloc)(void** ptr, size_t bytes, unsigned flags) = nullptr;              // hipHostMalloc
  hipError_t (*hostFree)(void* ptr) = nullptr;                                               // hipHostFree
  hipError_t (*hostRegister)(void* ptr, size_t bytes, unsigned flags) = nullptr;             // hipHostRegister
  hipError_t (*hostUnregister)(void* ptr) = nullptr;                                         // hipHostUnregister
  hipError_t (*hostGetDevicePointer)(void** dptr, void* hptr, unsigned flags) = nullptr;     // hipHostGetDevicePointer
  hipError_t (*memcpyAsync)(void* dst, const void* src, size_t bytes, int kind, hipStream_t stream) = nullptr;  // hipMemcpyAsync
  hipError_t (*memsetD8Async)(void* dst, unsigned char value, size_t bytes, hipStream_t stream) = nullptr;  // hipMemsetD8Async
  hipError_t (*memGetAddressRange)(void** base, size_t* size, void* ptr) = nullptr;  // hipMemGetAddressRange
  // Returns an error for host memory HIP does not know (CUDA reports it as host memory).
  hipError_t (*pointerGetAttributes)(PointerAttributes* attr, const void* ptr) = nullptr;  // hipPointerGetAttributes
  // hipIpcOpenMemHandle maps the allocation's base: the exporter sends the offset itself.
  hipError_t (*ipcGetMemHandle)(IpcMemHandle* handle, void* ptr) = nullptr;                  // hipIpcGetMemHandle
  hipError_t (*ipcOpenMemHandle)(void** ptr, IpcMemHandle handle, unsigned flags) = nullptr;  // hipIpcOpenMemHandle
  hipError_t (*ipcCloseMemHandle)(void* ptr) = nullptr;                                       // hipIpcCloseMemHandle

  // What the binding found.
  std::string soname;          // "libamdhip64.so.5"
  int runtimeVersion = 0;      // hipRuntimeGetVersion: major * 10000000 + minor * 100000 + patch
  int runtimeMajor = 0;        // 5, 6, 7
  int propertiesLayout = 0;    // 600: hipDeviceProp_t of ROCm 6 (R0600); 0: the layout before
};

// One entry point of the table: the names tried (newest first) and what was bound.
struct SymbolBinding {
  std::vector<std::string> names;
  bool optional = false;
  std::string whyOptional;  // what the backend does without it
  std::string bound;        // the name that resolved; empty when none did
  void* address = nullptr;
};

// The runtime of this process, loaded once (dlopen, newest soname first) with every required
// entry point bound; nullptr with the reason in *why when none loads or one lacks an entry
// point. hipInit is not called here: probeDevices does, since without a GPU it fails.
const HipApi* loadHipRuntime(std::string* why);
// Every entry point the table binds, with the outcome (after loadHipRuntime).
const std::vector<SymbolBinding>& hipBindings();
// The sonames tried, newest first.
const std::vector<std::string>& hipSonames();

// How many HIP devices this process sees (hipInit, then hipGetDeviceCount); 0 with the reason
// in *why when none ("no AMD GPU visible: hipInit: hipErrorInvalidDevice, ...").
int probeDevices(const HipApi& api, std::string* why);

// "hipErrorNoDevice (100)".
std::string errorText(const HipApi& api, hipError_t r);

// What a hipPointerGetAttributes type value means, read by the runtime's major version.
enum class MemoryKind { Unregistered, Host, Device, Managed, Array, Unified, Unknown };
MemoryKind memoryKind(int type, int runtimeMajor);

}  // namespace accl::dev::hip
