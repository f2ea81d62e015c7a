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

// True when the libcuda.so.1 of this process is the fake (so a test may rely on it).
inline bool fakeCudaAvailable() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return false;
  auto probe = reinterpret_cast<int (*)()>(dlsym(lib, "fakeCudaIsFake"));
  dlclose(lib);
  return probe != nullptr && probe() == 1;
}
