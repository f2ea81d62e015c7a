// test_driver.h: the CUDA driver as the tests of the CUDA backend use it, loaded at run time
// (dlopen libcuda.so.1) so one source runs on the fake driver (tests linked with it, label
// fakegpu) and on a real GPU (label gpu), and skips with the reason where there is neither.
#pragma once
#include <cstddef>
#include <cuda.h>
#include <string>

namespace accl_cuda_test {

struct TestDriver {
  CUresult (*init)(unsigned);
  CUresult (*deviceGetCount)(int*);
  CUresult (*deviceGet)(CUdevice*, int);
  CUresult (*primaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*ctxSetCurrent)(CUcontext);
  CUresult (*ctxGetCurrent)(CUcontext*);
  CUresult (*memAlloc)(CUdeviceptr*, size_t);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*memGetInfo)(size_t*, size_t*);
  CUresult (*memcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*memcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*memcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*memcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*memHostAlloc)(void**, size_t, unsigned);
  CUresult (*memFreeHost)(void*);
  CUresult (*streamCreate)(CUstream*, unsigned);
  CUresult (*streamDestroy)(CUstream);
  CUresult (*streamSynchronize)(CUstream);
  CUresult (*streamQuery)(CUstream);
  CUresult (*streamWaitValue64)(CUstream, CUdeviceptr, cuuint64_t, unsigned);
  CUresult (*memHostGetDevicePointer)(CUdeviceptr*, void*, unsigned);
  CUresult (*streamBeginCapture)(CUstream, CUstreamCaptureMode);
  CUresult (*streamEndCapture)(CUstream, CUgraph*);
  CUresult (*graphInstantiate)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*graphLaunch)(CUgraphExec, CUstream);
  CUresult (*graphExecDestroy)(CUgraphExec);
  CUresult (*graphDestroy)(CUgraph);
};

// The driver with device 0's primary context made current on the calling thread, or nullptr
// with the reason (no driver, no device) in *why.
const TestDriver* testDriver(std::string* why);
// Makes device `ordinal`'s primary context current on this thread (each rank thread calls it
// before ncclCommInitRank, as a CUDA program calls cudaSetDevice).
bool useDevice(int ordinal);

}  // namespace accl_cuda_test
