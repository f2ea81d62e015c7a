// fake_hip_api.h: the HIP runtime entry points the HIP backend's tests call, as the fake HIP face
// (tests/fake_cuda/hip_face.cc, build/tests/fake_cuda/libamdhip64.so.6) exports them with HIP's C
// ABI; the tests link it (accl_add_fakehip_test), so they call HIP as a ROCm program would, with
// no ROCm headers. Types are the handles' shapes only.
#pragma once
#include <cstddef>
#include <cstdint>

extern "C" {
using hipError_t = int;
struct ihipStream_t;
using hipStream_t = ihipStream_t*;
struct hipGraph_st;
using hipGraph_t = hipGraph_st*;
struct hipGraphExec_st;
using hipGraphExec_t = hipGraphExec_st*;

hipError_t hipSetDevice(int device);
hipError_t hipGetDevice(int* device);
hipError_t hipGetDeviceCount(int* count);
hipError_t hipMalloc(void** p, size_t bytes);
hipError_t hipFree(void* p);
hipError_t hipHostMalloc(void** p, size_t bytes, unsigned flags);
hipError_t hipHostFree(void* p);
hipError_t hipHostGetDevicePointer(void** d, void* p, unsigned flags);
hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, int kind, hipStream_t s);
hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned flags);
hipError_t hipStreamDestroy(hipStream_t s);
hipError_t hipStreamSynchronize(hipStream_t s);
hipError_t hipStreamWaitValue64(hipStream_t s, void* ptr, uint64_t value, unsigned flags, uint64_t mask);
hipError_t hipStreamBeginCapture(hipStream_t s, int mode);
hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t* graph);
hipError_t hipGraphInstantiate(hipGraphExec_t* exec, hipGraph_t graph, void* errorNode, char* log, size_t logBytes);
hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t s);
hipError_t hipGraphExecDestroy(hipGraphExec_t exec);
hipError_t hipGraphDestroy(hipGraph_t graph);

// The fake's hooks (hip_face.cc).
int fakeHipRocmMajor(void);
unsigned long long fakeHipNonCoherentHostAllocs(void);
unsigned long long fakeHipBundleLoads(void);
unsigned long long fakeHipFineGrainedAllocs(void);
}

inline constexpr hipError_t hipSuccess = 0;
inline constexpr unsigned hipStreamNonBlocking = 0x1;
inline constexpr int hipMemcpyDefault = 4;
inline constexpr unsigned hipHostMallocMapped = 0x2;
inline constexpr unsigned hipHostMallocCoherent = 0x40000000;
inline constexpr unsigned hipStreamWaitValueGte = 0x0;
inline constexpr int hipStreamCaptureModeThreadLocal = 1;
