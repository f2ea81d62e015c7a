// driver_api.h: the part of the CUDA driver API ACCL uses, as a table of function pointers
// filled at run time from libcuda.so.1. libnccl.so.2 links nothing CUDA, so it loads and runs
// the host backend on machines with no driver; tests hand in a fake table. The few types and
// enum values are declared here (they are the driver's ABI) so this builds without CUDA headers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include "nccl.h"

namespace accl::dev::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
using CUcontext = CUctx_st*;
using CUstream = cudaStream_t;  // the runtime's stream is the driver's
struct CUmod_st;
using CUmodule = CUmod_st*;
struct CUfunc_st;
using CUfunction = CUfunc_st*;
struct CUevent_st;
using CUevent = CUevent_st*;
// CUipcMemHandle: passed by value to cuIpcOpenMemHandle.
struct IpcMemHandle {
  unsigned char reserved[64];
};
struct Uuid {
  unsigned char bytes[16];
};

inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorInvalidValue = 1;
inline constexpr CUresult kErrorPeerAccessAlreadyEnabled = 704;  // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
inline constexpr CUresult kErrorNotReady = 600;  // CUDA_ERROR_NOT_READY (cuEventQuery, cuStreamQuery)
// Flags
inline constexpr unsigned kStreamNonBlocking = 0x1;      // CU_STREAM_NON_BLOCKING
inline constexpr unsigned kEventDisableTiming = 0x2;     // CU_EVENT_DISABLE_TIMING
inline constexpr unsigned kMemHostRegisterPortable = 0x1;   // CU_MEMHOSTREGISTER_PORTABLE
inline constexpr unsigned kMemHostRegisterDeviceMap = 0x2;  // CU_MEMHOSTREGISTER_DEVICEMAP
inline constexpr unsigned kMemHostAllocPortable = 0x1;      // CU_MEMHOSTALLOC_PORTABLE
inline constexpr unsigned kMemHostAllocDeviceMap = 0x2;     // CU_MEMHOSTALLOC_DEVICEMAP
inline constexpr unsigned kStreamWriteValueDefault = 0x0;  // CU_STREAM_WRITE_VALUE_DEFAULT
inline constexpr unsigned kStreamWaitValueGeq = 0x0;       // CU_STREAM_WAIT_VALUE_GEQ
inline constexpr unsigned kIpcMemLazyEnablePeerAccess = 0x1;  // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
// CUstreamCaptureStatus
inline constexpr int kCaptureStatusNone = 0;
inline constexpr int kCaptureStatusActive = 1;
inline constexpr int kCaptureStatusInvalidated = 2;
// CUstreamCaptureMode
inline constexpr int kCaptureModeRelaxed = 2;
// CUdevice_attribute
inline constexpr int kAttrMultiprocessorCount = 16;
inline constexpr int kAttrUnifiedAddressing = 41;
inline constexpr int kAttrComputeCapabilityMajor = 75;
inline constexpr int kAttrComputeCapabilityMinor = 76;
inline constexpr int kAttrCanUseHostPointerForRegisteredMem = 91;
// CUpointer_attribute
inline constexpr int kPointerAttributeContext = 1;
inline constexpr int kPointerAttributeMemoryType = 2;
inline constexpr int kPointerAttributeIsManaged = 8;
inline constexpr int kPointerAttributeDeviceOrdinal = 9;
inline constexpr int kPointerAttributeRangeStartAddr = 11;
inline constexpr int kPointerAttributeRangeSize = 12;
// CUmemorytype
inline constexpr unsigned kMemoryTypeHost = 1;
inline constexpr unsigned kMemoryTypeDevice = 2;
inline constexpr unsigned kMemoryTypeUnified = 4;

struct DriverApi {
  CUresult (*init)(unsigned flags) = nullptr;                       // cuInit
  CUresult (*driverGetVersion)(int* version) = nullptr;             // cuDriverGetVersion
  CUresult (*deviceGetCount)(int* count) = nullptr;                 // cuDeviceGetCount
  CUresult (*ctxGetDevice)(CUdevice* device) = nullptr;             // cuCtxGetDevice
  CUresult (*pointerGetAttribute)(void* data, int attribute, CUdeviceptr ptr) = nullptr;  // cuPointerGetAttribute
  CUresult (*getErrorString)(CUresult error, const char** text) = nullptr;                // cuGetErrorString
  CUresult (*deviceGet)(CUdevice* device, int ordinal) = nullptr;                         // cuDeviceGet
  CUresult (*primaryCtxRetain)(CUcontext* ctx, CUdevice device) = nullptr;                // cuDevicePrimaryCtxRetain
  CUresult (*ctxSetCurrent)(CUcontext ctx) = nullptr;                                     // cuCtxSetCurrent
  CUresult (*ctxSynchronize)() = nullptr;                                                 // cuCtxSynchronize
  CUresult (*moduleLoadData)(CUmodule* module, const void* image) = nullptr;              // cuModuleLoadData
  CUresult (*moduleGetFunction)(CUfunction* fn, CUmodule module, const char* name) = nullptr;  // cuModuleGetFunction
  CUresult (*memAlloc)(CUdeviceptr* ptr, size_t bytes) = nullptr;                         // cuMemAlloc_v2
  CUresult (*memFree)(CUdeviceptr ptr) = nullptr;                                         // cuMemFree_v2
  CUresult (*memcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes) = nullptr;       // cuMemcpyHtoD_v2
  CUresult (*memcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes) = nullptr;             // cuMemcpyDtoH_v2
  CUresult (*launchKernel)(CUfunction fn, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                           unsigned blockY, unsigned blockZ, unsigned sharedBytes, CUstream stream, void** params,
                           void** extra) = nullptr;                                       // cuLaunchKernel
  // Device, context and stream (the CUDA backend, issue 10).
  CUresult (*ctxGetCurrent)(CUcontext* ctx) = nullptr;                                      // cuCtxGetCurrent
  CUresult (*primaryCtxRelease)(CUdevice device) = nullptr;                                 // cuDevicePrimaryCtxRelease_v2
  CUresult (*deviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;     // cuDeviceGetAttribute
  CUresult (*deviceGetPCIBusId)(char* busId, int len, CUdevice device) = nullptr;           // cuDeviceGetPCIBusId
  CUresult (*deviceGetUuid)(Uuid* uuid, CUdevice device) = nullptr;                         // cuDeviceGetUuid
  CUresult (*streamCreate)(CUstream* stream, unsigned flags) = nullptr;                     // cuStreamCreate
  CUresult (*streamDestroy)(CUstream stream) = nullptr;                                     // cuStreamDestroy_v2
  CUresult (*streamSynchronize)(CUstream stream) = nullptr;                                 // cuStreamSynchronize
  CUresult (*streamQuery)(CUstream stream) = nullptr;                                       // cuStreamQuery
  CUresult (*streamWaitEvent)(CUstream stream, CUevent event, unsigned flags) = nullptr;    // cuStreamWaitEvent
  CUresult (*streamIsCapturing)(CUstream stream, int* status) = nullptr;                    // cuStreamIsCapturing
  CUresult (*streamGetCtx)(CUstream stream, CUcontext* ctx) = nullptr;                      // cuStreamGetCtx
  // Optional (CUDA 12.0+): a stream's process-unique id, never reused as handles may be.
  CUresult (*streamGetId)(CUstream stream, unsigned long long* id) = nullptr;               // cuStreamGetId
  // Optional: a stream waits until a 64-bit word reaches a value (CU_STREAM_WAIT_VALUE_GEQ).
  CUresult (*streamWaitValue64)(CUstream stream, CUdeviceptr addr, uint64_t value, unsigned flags) = nullptr;  // cuStreamWaitValue64_v2
  CUresult (*eventCreate)(CUevent* event, unsigned flags) = nullptr;                        // cuEventCreate
  CUresult (*eventRecord)(CUevent event, CUstream stream) = nullptr;                        // cuEventRecord
  CUresult (*eventQuery)(CUevent event) = nullptr;                                          // cuEventQuery
  CUresult (*eventDestroy)(CUevent event) = nullptr;                                        // cuEventDestroy_v2
  // Memory.
  CUresult (*memcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) = nullptr;  // cuMemcpyAsync
  CUresult (*memsetD8Async)(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream) = nullptr;  // cuMemsetD8Async
  CUresult (*memHostAlloc)(void** ptr, size_t bytes, unsigned flags) = nullptr;          // cuMemHostAlloc
  CUresult (*memFreeHost)(void* ptr) = nullptr;                                          // cuMemFreeHost
  CUresult (*memHostGetDevicePointer)(CUdeviceptr* dptr, void* p, unsigned flags) = nullptr;  // cuMemHostGetDevicePointer_v2
  CUresult (*memHostRegister)(void* ptr, size_t bytes, unsigned flags) = nullptr;        // cuMemHostRegister_v2
  CUresult (*memHostUnregister)(void* ptr) = nullptr;                                    // cuMemHostUnregister
  CUresult (*memGetAddressRange)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) = nullptr;  // cuMemGetAddressRange_v2
  CUresult (*ipcGetMemHandle)(IpcMemHandle* handle, CUdeviceptr ptr) = nullptr;              // cuIpcGetMemHandle
  CUresult (*ipcOpenMemHandle)(CUdeviceptr* ptr, IpcMemHandle handle, unsigned flags) = nullptr;  // cuIpcOpenMemHandle_v2
  CUresult (*ipcCloseMemHandle)(CUdeviceptr ptr) = nullptr;                                   // cuIpcCloseMemHandle
  // Peer access between devices (a kernel of one reaching another's memory).
  CUresult (*deviceCanAccessPeer)(int* can, CUdevice dev, CUdevice peer) = nullptr;  // cuDeviceCanAccessPeer
  CUresult (*ctxEnablePeerAccess)(CUcontext peer, unsigned flags) = nullptr;          // cuCtxEnablePeerAccess
  // Optional (null when the driver lacks it): the calling thread's stream-capture mode.
  CUresult (*threadExchangeStreamCaptureMode)(int* mode) = nullptr;  // cuThreadExchangeStreamCaptureMode
  // Optional: how many blocks of a kernel fit on one SM at once.
  CUresult (*occupancyMaxActiveBlocksPerMultiprocessor)(int* blocks, CUfunction fn, int blockSize,
                                                        size_t dynamicSharedBytes) = nullptr;

  // Optional: device memory that kernels of other devices and processes poll (the collective
  // mailboxes, exported with ipcGetMemHandle); null: memAlloc. HIP: fine-grained memory.
  CUresult (*memAllocShared)(CUdeviceptr* ptr, size_t bytes) = nullptr;

  // Which runtime the table drives. The HIP backend is this backend with a table whose entries
  // call ROCm's HIP runtime (device/hip/hip_driver.h): the execution model is written once.
  const char* runtime = "CUDA";  // in log lines: "CUDA backend", "HIP device 0"
  const char* backendName = "cuda";  // Backend::name()
  // The kernel image CudaDevice loads with moduleLoadData: null means the embedded nvcc fatbin;
  // the HIP table hands the embedded clang offload bundle.
  const void* (*kernelImage)(size_t* bytes) = nullptr;
  // Why an empty kernelImage is empty, for the WARN.
  const char* noKernelsWhy = "nvcc was not found when it was built";
};

// The driver of this process, loaded and initialised (cuInit) once; nullptr when there is
// none or it cannot start, with the reason in *why.
const DriverApi* loadDriver(std::string* why);

// "CUDA_ERROR_NO_DEVICE"-style text for log lines ("error 100" when the driver cannot say).
std::string errorText(const DriverApi& api, CUresult r);

}  // namespace accl::dev::cuda
