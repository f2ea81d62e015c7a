// portable.h: the few things device kernels need from the machine, so that kernels/device_kernels.h
// is written once and compiled three ways:
//   - nvcc (kernels/cuda/device_kernels.cu): CUDA, the fatbin embedded in libnccl.so.2;
//   - clang -x hip (HIP, AMD GPUs): __HIP__ is defined, the indices and fences come from clang's
//     AMD GPU builtins, since the build uses -nogpuinc (no HIP headers);
//   - the host compiler (kernels/emulated/): every block a host thread and every thread of a
//     block a fiber, with real barriers, so the fake CUDA driver runs the very same kernel code,
//     flag protocols included, when the library launches a kernel (tests/fake_cuda).
// Kernel code uses only what is below: indices, block barrier, flag loads and stores with
// system-scope acquire/release, a pause for spin loops, a device-wide clock and a one-time claim
// of a word (timeouts), 16-byte vector loads with a scalar
// tail (vecAligned), and devicePointer() for every pointer a kernel reads from memory (the
// emulated build maps device addresses to where the CPU reaches them; a GPU needs nothing).
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__HIP__) && !defined(__global__)
// The HIP build uses -nogpuinc (no HIP headers, so no ROCm install is needed to build): the
// CUDA-style keywords are clang's own attributes, as ROCm's headers spell them.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ __attribute__((shared))
#endif

#if defined(__CUDACC__) || defined(__HIP__)
#define ACCL_DEVICE_BUILD 1
#define ACCL_KERNEL extern "C" __global__ void
#define ACCL_DEV __device__ __forceinline__
#else
#define ACCL_DEVICE_BUILD 0
#define ACCL_DEV inline
#endif

// A variable shared by the threads of one block (GPU shared memory). The emulation runs a block
// on one host thread (its threads are fibers of it), so a thread_local is the block's own.
#if ACCL_DEVICE_BUILD
#define ACCL_BLOCK_SHARED(decl) __shared__ decl
#else
#define ACCL_BLOCK_SHARED(decl) static thread_local decl
#endif

// Fully unrolls the loop that follows (a fixed trip count).
#if ACCL_DEVICE_BUILD
#define ACCL_UNROLL _Pragma("unroll")
#else
#define ACCL_UNROLL _Pragma("GCC unroll 8")
#endif

namespace accl::kern {

// 16 bytes moved as one access: a GPU's widest plain load/store.
struct alignas(16) Vec16 {
  uint64_t lo, hi;
};

#if defined(__CUDACC__)

ACCL_DEV unsigned threadIndex() { return threadIdx.x; }
ACCL_DEV unsigned blockIndex() { return blockIdx.x; }
ACCL_DEV unsigned blockSize() { return blockDim.x; }
ACCL_DEV unsigned gridSize() { return gridDim.x; }
ACCL_DEV void syncBlock() { __syncthreads(); }
// Writes made before the store are visible to whoever sees the store (other GPUs, the host).
ACCL_DEV void storeRelease(uint64_t* flag, uint64_t v) {
  __threadfence_system();
  *reinterpret_cast<volatile uint64_t*>(flag) = v;
}
ACCL_DEV uint64_t loadAcquire(const uint64_t* flag) {
  const uint64_t v = *reinterpret_cast<const volatile uint64_t*>(flag);
  __threadfence_system();
  return v;
}
// Orders this thread's memory accesses before and after it, as the host and other GPUs see them.
ACCL_DEV void fenceSystem() { __threadfence_system(); }
ACCL_DEV void spinPause() {
#if __CUDA_ARCH__ >= 700
  __nanosleep(64);
#endif
}
template <class T>
ACCL_DEV T* devicePointer(T* p) {
  return p;
}
// Nanoseconds of a clock that runs across the whole device (for timeouts, not for timing).
ACCL_DEV uint64_t nowNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// One thread of the grid claims *word (0 -> v); true for the one that did.
// Adds v to *word and returns what it held; writes before it are visible to whoever sees the sum
// (system scope, as storeRelease), and writes after it follow it.
ACCL_DEV uint64_t fetchAdd(uint64_t* word, uint64_t v) {
  __threadfence_system();
  const uint64_t old = atomicAdd(reinterpret_cast<unsigned long long*>(word), static_cast<unsigned long long>(v));
  __threadfence_system();
  return old;
}
ACCL_DEV bool claimOnce(uint64_t* word, uint64_t v) {
  return atomicCAS(reinterpret_cast<unsigned long long*>(word), 0ull, static_cast<unsigned long long>(v)) == 0;
}

#elif defined(__HIP__)

// nccl.h pulls in CUDA's headers when they are on the include path; their __global__ is not
// clang's, and the kernels would silently become plain functions (an empty code object).
#if defined(ACCL_NCCL_H_WITH_CUDA)
#error "HIP build: define ACCL_NCCL_H_HOST_ONLY before nccl.h (kernels/hip/device_kernels.hip does)"
#endif

// Indices from clang's AMDGPU builtins (BuiltinsAMDGPU.def). workgroup_size_x reads the
// dispatch's block size (code object v5: the implicit kernel arguments, hence
// -mcode-object-version=5 at build time); grid_size_x is the grid in work-items, which HIP
// launches as a whole number of blocks, so the division is exact.
ACCL_DEV unsigned threadIndex() { return __builtin_amdgcn_workitem_id_x(); }
ACCL_DEV unsigned blockIndex() { return __builtin_amdgcn_workgroup_id_x(); }
ACCL_DEV unsigned blockSize() { return __builtin_amdgcn_workgroup_size_x(); }
ACCL_DEV unsigned gridSize() { return __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(); }
// __syncthreads: make the block's writes visible inside the workgroup, meet, then see them.
ACCL_DEV void syncBlock() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
// System scope named explicitly (the host and other GPUs read these flags): on gfx90a the
// release is an L2 writeback (buffer_wbl2) before the store and the acquire a glc load
// followed by cache invalidates; on gfx942 both accesses carry sc0 sc1. Polled memory must still be fine-grained
// (coherent) memory: that is the allocation's job, not the kernel's.
ACCL_DEV void storeRelease(uint64_t* flag, uint64_t v) {
  __hip_atomic_store(flag, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}
ACCL_DEV uint64_t loadAcquire(const uint64_t* flag) {
  return __hip_atomic_load(flag, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
}
// A sequentially consistent fence; clang gives it system scope on AMD GPUs.
ACCL_DEV void fenceSystem() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
// s_sleep 1: about 64 clocks, like CUDA's __nanosleep(64) above.
ACCL_DEV void spinPause() { __builtin_amdgcn_s_sleep(1); }
template <class T>
ACCL_DEV T* devicePointer(T* p) {
  return p;
}
// s_memrealtime counts at a constant 100 MHz on gfx9 parts.
ACCL_DEV uint64_t nowNs() { return __builtin_amdgcn_s_memrealtime() * 10; }
ACCL_DEV uint64_t fetchAdd(uint64_t* word, uint64_t v) {
  return __hip_atomic_fetch_add(word, v, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_SYSTEM);
}
ACCL_DEV bool claimOnce(uint64_t* word, uint64_t v) {
  uint64_t expected = 0;
  return __hip_atomic_compare_exchange_strong(word, &expected, v, __ATOMIC_RELAXED, __ATOMIC_RELAXED,
                                              __HIP_MEMORY_SCOPE_SYSTEM);
}

#else  // the emulated build: kernels/emulated/grid.cc runs the grid

// Where the running fiber is in the grid (set by the grid runner at every switch).
struct ThreadCoords {
  unsigned thread = 0, block = 0, blockDim = 1, gridDim = 1;
};
extern thread_local ThreadCoords tlsCoords;
// Blocks the calling fiber until every thread of its block got here.
void syncBlock();
// Lets the other fibers of the block (and other host threads) run while this one spins.
void spinPause();
// The address at which the CPU reaches device address `p` (the fake's writable view), or a
// fault that ends the kernel with an illegal-address error when `p` is nothing a GPU could reach.
void* hostView(const void* p);

inline unsigned threadIndex() { return tlsCoords.thread; }
inline unsigned blockIndex() { return tlsCoords.block; }
inline unsigned blockSize() { return tlsCoords.blockDim; }
inline unsigned gridSize() { return tlsCoords.gridDim; }
inline void storeRelease(uint64_t* flag, uint64_t v) { __atomic_store_n(flag, v, __ATOMIC_SEQ_CST); }
// Monotonic nanoseconds (the emulation's stand-in for the device's global timer).
uint64_t nowNs();
inline uint64_t fetchAdd(uint64_t* word, uint64_t v) { return __atomic_fetch_add(word, v, __ATOMIC_SEQ_CST); }
inline bool claimOnce(uint64_t* word, uint64_t v) {
  uint64_t expected = 0;
  return __atomic_compare_exchange_n(word, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
inline uint64_t loadAcquire(const uint64_t* flag) { return __atomic_load_n(flag, __ATOMIC_SEQ_CST); }
inline void fenceSystem() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <class T>
T* devicePointer(T* p) {
  return static_cast<T*>(hostView(p));
}
// A 16-byte access at an address that is not 16-byte aligned: a GPU raises a misaligned-address
// fault, and so does the emulation (kernels must check vecAligned first).
void misalignedVectorAccess(const void* p);

#endif

// Index of this thread in the whole grid, and the grid-stride step.
ACCL_DEV size_t globalThread() { return blockIndex() * static_cast<size_t>(blockSize()) + threadIndex(); }
ACCL_DEV size_t gridThreads() { return static_cast<size_t>(gridSize()) * blockSize(); }

// True when every pointer allows 16-byte vector access.
ACCL_DEV bool vecAligned(const void* a, const void* b) {
  return ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) & 15) == 0;
}
ACCL_DEV Vec16 loadVec(const void* p) {
#if !ACCL_DEVICE_BUILD
  if (reinterpret_cast<uintptr_t>(p) & 15) misalignedVectorAccess(p);
#endif
  return *static_cast<const Vec16*>(p);
}
ACCL_DEV void storeVec(void* p, Vec16 v) {
#if !ACCL_DEVICE_BUILD
  if (reinterpret_cast<uintptr_t>(p) & 15) misalignedVectorAccess(p);
#endif
  *static_cast<Vec16*>(p) = v;
}

// Vectors each thread keeps in flight in stridedCopy: one 16-byte load per thread leaves a GPU's
// memory system mostly idle (a load's latency is ~1 us); several independent loads issued before
// the first store overlap their latencies.
constexpr int kCopyUnroll = 8;

// Copies `bytes`, thread `first` of `step` threads taking every step-th piece: 16-byte vectors
// when both ends are 16-byte aligned (kCopyUnroll of them loaded before any is stored), else
// bytes (user buffers may be only element-aligned: a vector access there faults on a GPU).
// The ends must not overlap.
ACCL_DEV void stridedCopy(char* __restrict__ dst, const char* __restrict__ src, size_t bytes, size_t first,
                          size_t step) {
  size_t head = 0;
  if (vecAligned(dst, src)) {
    const size_t vecs = bytes / 16;
    const size_t span = step * kCopyUnroll;
    const size_t whole = vecs / span * span;  // vectors covered by full rounds of every thread
    for (size_t base = first; base < whole; base += span) {
      Vec16 v[kCopyUnroll];  // constant indices only, after unrolling: registers
      ACCL_UNROLL for (int u = 0; u < kCopyUnroll; u++) v[u] = loadVec(src + 16 * (base + u * step));
      ACCL_UNROLL for (int u = 0; u < kCopyUnroll; u++) storeVec(dst + 16 * (base + u * step), v[u]);
    }
    for (size_t i = whole + first; i < vecs; i += step) storeVec(dst + 16 * i, loadVec(src + 16 * i));
    head = vecs * 16;
  }
  for (size_t i = head + first; i < bytes; i += step) dst[i] = src[i];
}

}  // namespace accl::kern

#if !ACCL_DEVICE_BUILD
#include "emulated/kernel_registry.h"
// The emulated build registers each kernel by name, with its parameter list, for the fake's
// cuLaunchKernel.
#define ACCL_KERNEL_NAMED(name, params)                                   \
  extern "C" void name params;                                            \
  static const ::accl::kern::KernelRegistration name##_registration(#name, &name); \
  extern "C" void name params
#else
#define ACCL_KERNEL_NAMED(name, params) ACCL_KERNEL name params
#endif
