#include "cuda/test_driver.h"
#include <dlfcn.h>
#include <mutex>

namespace accl_cuda_test {
namespace {

template <class Fn>
void bind(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr && missing->empty()) *missing = name;
}

TestDriver gDriver;
std::string gWhy;

bool load() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    gWhy = "no CUDA driver (libcuda.so.1 not found)";
    return false;
  }
  std::string missing;
  TestDriver& d = gDriver;
  bind(lib, "cuInit", &d.init, &missing);
  bind(lib, "cuDeviceGetCount", &d.deviceGetCount, &missing);
  bind(lib, "cuDeviceGet", &d.deviceGet, &missing);
  bind(lib, "cuDevicePrimaryCtxRetain", &d.primaryCtxRetain, &missing);
  bind(lib, "cuCtxSetCurrent", &d.ctxSetCurrent, &missing);
  bind(lib, "cuCtxGetCurrent", &d.ctxGetCurrent, &missing);
  bind(lib, "cuMemAlloc_v2", &d.memAlloc, &missing);
  bind(lib, "cuMemFree_v2", &d.memFree, &missing);
  bind(lib, "cuMemGetInfo_v2", &d.memGetInfo, &missing);
  bind(lib, "cuMemcpyHtoD_v2", &d.memcpyHtoD, &missing);
  bind(lib, "cuMemcpyHtoDAsync_v2", &d.memcpyHtoDAsync, &missing);
  bind(lib, "cuMemcpyDtoHAsync_v2", &d.memcpyDtoHAsync, &missing);
  bind(lib, "cuMemcpyDtoH_v2", &d.memcpyDtoH, &missing);
  bind(lib, "cuMemHostAlloc", &d.memHostAlloc, &missing);
  bind(lib, "cuMemFreeHost", &d.memFreeHost, &missing);
  bind(lib, "cuStreamCreate", &d.streamCreate, &missing);
  bind(lib, "cuStreamDestroy_v2", &d.streamDestroy, &missing);
  bind(lib, "cuStreamSynchronize", &d.streamSynchronize, &missing);
  bind(lib, "cuStreamQuery", &d.streamQuery, &missing);
  bind(lib, "cuStreamWaitValue64_v2", &d.streamWaitValue64, &missing);
  bind(lib, "cuMemHostGetDevicePointer_v2", &d.memHostGetDevicePointer, &missing);
  bind(lib, "cuStreamBeginCapture_v2", &d.streamBeginCapture, &missing);
  bind(lib, "cuStreamEndCapture", &d.streamEndCapture, &missing);
  bind(lib, "cuGraphInstantiateWithFlags", &d.graphInstantiate, &missing);
  bind(lib, "cuGraphLaunch", &d.graphLaunch, &missing);
  bind(lib, "cuGraphExecDestroy", &d.graphExecDestroy, &missing);
  bind(lib, "cuGraphDestroy", &d.graphDestroy, &missing);
  if (!missing.empty()) {
    gWhy = "the CUDA driver lacks " + missing;
    return false;
  }
  if (CUresult r = d.init(0); r != CUDA_SUCCESS) {
    gWhy = "cuInit failed with " + std::to_string(r) + " (no usable GPU)";
    return false;
  }
  int n = 0;
  if (d.deviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
    gWhy = "no CUDA device visible";
    return false;
  }
  return true;
}

}  // namespace

const TestDriver* testDriver(std::string* why) {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] { ok = load(); });
  if (!ok) {
    if (why) *why = gWhy;
    return nullptr;
  }
  if (!useDevice(0)) {
    if (why) *why = "cannot make device 0's primary context current";
    return nullptr;
  }
  return &gDriver;
}

bool useDevice(int ordinal) {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  return gDriver.deviceGet(&dev, ordinal) == CUDA_SUCCESS && gDriver.primaryCtxRetain(&ctx, dev) == CUDA_SUCCESS &&
         gDriver.ctxSetCurrent(ctx) == CUDA_SUCCESS;
}

}  // namespace accl_cuda_test
