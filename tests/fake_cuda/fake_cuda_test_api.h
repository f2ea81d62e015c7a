// fake_cuda_test_api.h: for test programs linked with the fake CUDA driver
// (build/tests/fake_cuda/libcuda.so.1, CMake: accl_add_fakegpu_test). Such a program loads the
// fake at start, so libnccl.so.2's dlopen("libcuda.so.1") finds it (same SONAME) and the CUDA
// backend runs on the host. What the fake emulates and what it does not: the comments at the
// top of tests/fake_cuda/internal.h, streams.cc and capture.cc, and docs/fake-cuda.md.
//
// Environment: FAKE_CUDA_DEVICES=N devices (default 1); FAKE_CUDA_MEMORY_GIB device memory
// arena per process (default 64, reserved address space, pages used on touch).
#pragma once
#include <dlfcn.h>
#include <cstddef>

extern "C" {
// Hooks the fake exports (declared weak: a program may also run without the fake).
int fakeCudaIsFake(void) __attribute__((weak));                      // 1
unsigned long long fakeCudaKernelRuns(const char* name) __attribute__((weak));  // name NULL: all kernels
unsigned long long fakeCudaMemopRuns(void) __attribute__((weak));    // stream write/wait value ops run
unsigned long long fakeCudaMemcpyRuns(void) __attribute__((weak));   // copies run
unsigned long long fakeCudaFunctionLookups(void) __attribute__((weak));  // cuModuleGetFunction calls
// Reads device (or any driver-known) memory now, bypassing streams: for test diagnostics.
// Returns 0 on success, -1 when [src, src+bytes) is not memory the driver knows.
int fakeCudaPeek(void* dst, unsigned long long src, size_t bytes) __attribute__((weak));
// Host memory registered with cuMemHostRegister now, in bytes.
unsigned long long fakeCudaRegisteredHostBytes(void) __attribute__((weak));
// cuMemFree of an exported allocation while another process still had it open (CUDA IPC).
unsigned long long fakeCudaFreesWhileOpen(void) __attribute__((weak));
// 1 when p lies in device memory (allocated here or IPC-imported), else 0.
int fakeCudaIsDevicePointer(const void* p) __attribute__((weak));
}

// The call log (call_log.cc): what this process asked of the driver since the last reset.
enum {
  FAKE_CUDA_QUEUED_LAUNCH,        // cuLaunchKernel
  FAKE_CUDA_QUEUED_MEMSET,        // cuMemsetD8/D32 (async or not)
  FAKE_CUDA_QUEUED_EVENT_RECORD,  // cuEventRecord
  FAKE_CUDA_QUEUED_STREAM_WAIT,   // cuStreamWaitEvent
  FAKE_CUDA_QUEUED_MEMCPY,        // cuMemcpy* (async or not)
  FAKE_CUDA_QUEUED_MEMOP,         // cuStreamWriteValue*/cuStreamWaitValue*
  FAKE_CUDA_QUEUED_KINDS
};
// Directions of a copy: bit 1 the source is device memory, bit 0 the destination is.
enum { FAKE_CUDA_HOST_TO_HOST, FAKE_CUDA_HOST_TO_DEVICE, FAKE_CUDA_DEVICE_TO_HOST, FAKE_CUDA_DEVICE_TO_DEVICE };
struct FakeCudaLaunch {
  char kernel[96];
  unsigned grid[3], block[3];
  unsigned long long argBytes;  // the kernel's parameters' sizes summed
};
struct FakeCudaCopy {
  int direction;  // FAKE_CUDA_HOST_TO_HOST ...
  int async;      // 1 for the *Async entry points
  unsigned long long bytes;
};

extern "C" {
// Forgets the log: calls and queued work counted from now on.
void fakeCudaLogReset(void) __attribute__((weak));
// Calls of a driver entry point ("cuPointerGetAttribute"; a _vN suffix is ignored, so
// "cuMemAlloc" counts cuMemAlloc_v2); NULL: all entry points. Counted when called, errors too.
unsigned long long fakeCudaDriverCalls(const char* entry) __attribute__((weak));
// Work of one kind (FAKE_CUDA_QUEUED_*) queued on a stream, or recorded into a capture, by
// calls that succeeded (a graph's replays are not counted: they queue nothing new).
unsigned long long fakeCudaQueued(int kind) __attribute__((weak));
// The i-th launch / copy since the reset (the first 4096 are kept); 0, or -1 when none.
int fakeCudaLaunchAt(unsigned long long i, struct FakeCudaLaunch* out) __attribute__((weak));
// Payload bytes kernels that report them (the direct kernel, kernels/direct_kernel.h) loaded
// (store 0) or stored (store 1) in memory of `kind`: 0 device, 1 imported (CUDA IPC), 2 host.
unsigned long long fakeCudaPayloadBytes(int kind, int store) __attribute__((weak));
void fakeCudaPayloadReset(void) __attribute__((weak));
int fakeCudaCopyAt(unsigned long long i, struct FakeCudaCopy* out) __attribute__((weak));
}

// True when the libcuda.so.1 of this process is the fake (so a test may rely on it).
inline bool fakeCudaAvailable() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return false;
  auto probe = reinterpret_cast<int (*)()>(dlsym(lib, "fakeCudaIsFake"));
  dlclose(lib);
  return probe != nullptr && probe() == 1;
}
