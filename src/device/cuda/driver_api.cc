#include "device/cuda/driver_api.h"
#include <dlfcn.h>
#include <mutex>

namespace accl::dev::cuda {
namespace {

template <class Fn>
bool bind(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr && missing->empty()) *missing = name;
  return *out != nullptr;
}

const DriverApi* load(std::string* why) {
  // Never dlclose'd: the driver stays for the life of the process, as with a linked libcuda.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    *why = std::string("no CUDA driver (") + (err ? err : "libcuda.so.1 not found") + ")";
    return nullptr;
  }
  static DriverApi api;
  std::string missing;
  bind(lib, "cuInit", &api.init, &missing);
  bind(lib, "cuDriverGetVersion", &api.driverGetVersion, &missing);
  bind(lib, "cuDeviceGetCount", &api.deviceGetCount, &missing);
  bind(lib, "cuCtxGetDevice", &api.ctxGetDevice, &missing);
  bind(lib, "cuPointerGetAttribute", &api.pointerGetAttribute, &missing);
  bind(lib, "cuGetErrorString", &api.getErrorString, &missing);
  bind(lib, "cuDeviceGet", &api.deviceGet, &missing);
  bind(lib, "cuDevicePrimaryCtxRetain", &api.primaryCtxRetain, &missing);
  bind(lib, "cuCtxSetCurrent", &api.ctxSetCurrent, &missing);
  bind(lib, "cuCtxSynchronize", &api.ctxSynchronize, &missing);
  bind(lib, "cuModuleLoadData", &api.moduleLoadData, &missing);
  bind(lib, "cuModuleGetFunction", &api.moduleGetFunction, &missing);
  bind(lib, "cuMemAlloc_v2", &api.memAlloc, &missing);
  bind(lib, "cuMemFree_v2", &api.memFree, &missing);
  bind(lib, "cuMemcpyHtoD_v2", &api.memcpyHtoD, &missing);
  bind(lib, "cuMemcpyDtoH_v2", &api.memcpyDtoH, &missing);
  bind(lib, "cuLaunchKernel", &api.launchKernel, &missing);
  bind(lib, "cuCtxGetCurrent", &api.ctxGetCurrent, &missing);
  bind(lib, "cuDevicePrimaryCtxRelease_v2", &api.primaryCtxRelease, &missing);
  bind(lib, "cuDeviceGetAttribute", &api.deviceGetAttribute, &missing);
  bind(lib, "cuDeviceGetPCIBusId", &api.deviceGetPCIBusId, &missing);
  bind(lib, "cuDeviceGetUuid", &api.deviceGetUuid, &missing);
  bind(lib, "cuStreamCreate", &api.streamCreate, &missing);
  bind(lib, "cuStreamDestroy_v2", &api.streamDestroy, &missing);
  bind(lib, "cuStreamSynchronize", &api.streamSynchronize, &missing);
  bind(lib, "cuStreamQuery", &api.streamQuery, &missing);
  bind(lib, "cuStreamWaitEvent", &api.streamWaitEvent, &missing);
  bind(lib, "cuStreamIsCapturing", &api.streamIsCapturing, &missing);
  bind(lib, "cuStreamGetCtx", &api.streamGetCtx, &missing);
  bind(lib, "cuEventCreate", &api.eventCreate, &missing);
  bind(lib, "cuEventRecord", &api.eventRecord, &missing);
  bind(lib, "cuEventQuery", &api.eventQuery, &missing);
  bind(lib, "cuEventDestroy_v2", &api.eventDestroy, &missing);
  bind(lib, "cuMemcpyAsync", &api.memcpyAsync, &missing);
  bind(lib, "cuMemsetD8Async", &api.memsetD8Async, &missing);
  bind(lib, "cuDeviceCanAccessPeer", &api.deviceCanAccessPeer, &missing);
  bind(lib, "cuCtxEnablePeerAccess", &api.ctxEnablePeerAccess, &missing);
  bind(lib, "cuMemHostAlloc", &api.memHostAlloc, &missing);
  bind(lib, "cuMemFreeHost", &api.memFreeHost, &missing);
  bind(lib, "cuMemHostGetDevicePointer_v2", &api.memHostGetDevicePointer, &missing);
  bind(lib, "cuMemHostRegister_v2", &api.memHostRegister, &missing);
  bind(lib, "cuMemHostUnregister", &api.memHostUnregister, &missing);
  bind(lib, "cuMemGetAddressRange_v2", &api.memGetAddressRange, &missing);
  bind(lib, "cuIpcGetMemHandle", &api.ipcGetMemHandle, &missing);
  bind(lib, "cuIpcOpenMemHandle_v2", &api.ipcOpenMemHandle, &missing);
  bind(lib, "cuIpcCloseMemHandle", &api.ipcCloseMemHandle, &missing);
  std::string optional;
  bind(lib, "cuThreadExchangeStreamCaptureMode", &api.threadExchangeStreamCaptureMode, &optional);
  bind(lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor", &api.occupancyMaxActiveBlocksPerMultiprocessor, &optional);
  bind(lib, "cuStreamGetId", &api.streamGetId, &optional);
  bind(lib, "cuStreamWaitValue64_v2", &api.streamWaitValue64, &optional);
  if (!missing.empty()) {
    *why = "the CUDA driver lacks " + missing + " (too old?)";
    return nullptr;
  }
  CUresult r = api.init(0);
  if (r != kSuccess) {
    *why = "cuInit failed: " + errorText(api, r);
    return nullptr;
  }
  return &api;
}

}  // namespace

const DriverApi* loadDriver(std::string* why) {
  static std::once_flag once;
  static const DriverApi* api = nullptr;
  static std::string reason;
  std::call_once(once, [] { api = load(&reason); });
  if (api == nullptr && why) *why = reason;
  return api;
}

std::string errorText(const DriverApi& api, CUresult r) {
  const char* text = nullptr;
  if (api.getErrorString && api.getErrorString(r, &text) == kSuccess && text) return text;
  return "error " + std::to_string(r);
}

}  // namespace accl::dev::cuda
