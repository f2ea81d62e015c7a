// driver_api.h: the part of the CUDA driver API ACCL uses, as a table of function pointers
// filled at run time from libcuda.so.1. libnccl.so.2 links nothing CUDA, so it loads and runs
// the host backend on machines with no driver; tests hand in a fake table. The few types and
// enum values are declared here (they are the driver's ABI) so this builds without CUDA headers.
#pragma once
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

inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorInvalidValue = 1;
// CUpointer_attribute
inline constexpr int kPointerAttributeContext = 1;
inline constexpr int kPointerAttributeMemoryType = 2;
inline constexpr int kPointerAttributeIsManaged = 8;
inline constexpr int kPointerAttributeDeviceOrdinal = 9;
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
};

// The driver of this process, loaded and initialised (cuInit) once; nullptr when there is
// none or it cannot start, with the reason in *why.
const DriverApi* loadDriver(std::string* why);

// "CUDA_ERROR_NO_DEVICE"-style text for log lines ("error 100" when the driver cannot say).
std::string errorText(const DriverApi& api, CUresult r);

}  // namespace accl::dev::cuda
