// device_kernels.cu: the CUDA kernels behind the device backend's copy/reduce/scale/divide,
// compiled by nvcc into a fatbin (sm_80, sm_90, sm_100 + PTX; ACCL_CUDA_ARCHS narrows) that
// the backend loads at run time with cuModuleLoadData, so libnccl.so.2 needs no CUDA to load.
// The element arithmetic is kernels/host/element_types.h itself (constexpr, so nvcc compiles
// it for the device with --expt-relaxed-constexpr): device and host results are bitwise equal.
// Entry points are extern "C" so the backend finds them by name:
//   accl_reduce2_<type>_<op>(dst, a, b, count)   op: sum prod max min
//   accl_scale_<type>(dst, src, scalarPtr, count) scalar read from device or mapped memory
//   accl_divide_<type>(dst, src, divisor, count)
//   accl_copy(dst, src, bytes)
// <type> is dev::typeName's spelling (kernels/host/type_info.cc): the backend builds names from it.
// Only grid-stride loops: no CUDA-only intrinsics, so hipcc can compile the same file.
#include <cstddef>
#include <cstdint>
#include "host/element_types.h"

namespace {

using namespace accl::dev::host;

__device__ __forceinline__ size_t firstIndex() { return blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ size_t gridStride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

template <class E, class Op>
__device__ __forceinline__ void reduce2(void* dstv, const void* av, const void* bv, size_t count) {
  using S = typename E::Storage;
  S* dst = static_cast<S*>(dstv);
  const S* a = static_cast<const S*>(av);
  const S* b = static_cast<const S*>(bv);
  for (size_t i = firstIndex(); i < count; i += gridStride()) dst[i] = E::narrow(Op::apply(E::widen(a[i]), E::widen(b[i])));
}

template <class E>
__device__ __forceinline__ void scale(void* dstv, const void* srcv, const void* scalarv, size_t count) {
  using S = typename E::Storage;
  S* dst = static_cast<S*>(dstv);
  const S* src = static_cast<const S*>(srcv);
  const typename E::Compute scalar = E::widen(*static_cast<const S*>(scalarv));
  for (size_t i = firstIndex(); i < count; i += gridStride()) dst[i] = E::narrow(ProdOp::apply(E::widen(src[i]), scalar));
}

template <class E>
__device__ __forceinline__ void divide(void* dstv, const void* srcv, int divisor, size_t count) {
  using S = typename E::Storage;
  S* dst = static_cast<S*>(dstv);
  const S* src = static_cast<const S*>(srcv);
  for (size_t i = firstIndex(); i < count; i += gridStride()) dst[i] = divideOne<E>(src[i], divisor);
}

}  // namespace

#define ACCL_TYPE_KERNELS(name, nccltype)                                                                     \
  extern "C" __global__ void accl_reduce2_##name##_sum(void* d, const void* a, const void* b, size_t n) {     \
    reduce2<ElementOf<nccltype>::type, SumOp>(d, a, b, n);                                                    \
  }                                                                                                           \
  extern "C" __global__ void accl_reduce2_##name##_prod(void* d, const void* a, const void* b, size_t n) {    \
    reduce2<ElementOf<nccltype>::type, ProdOp>(d, a, b, n);                                                   \
  }                                                                                                           \
  extern "C" __global__ void accl_reduce2_##name##_max(void* d, const void* a, const void* b, size_t n) {     \
    reduce2<ElementOf<nccltype>::type, MaxOp>(d, a, b, n);                                                    \
  }                                                                                                           \
  extern "C" __global__ void accl_reduce2_##name##_min(void* d, const void* a, const void* b, size_t n) {     \
    reduce2<ElementOf<nccltype>::type, MinOp>(d, a, b, n);                                                    \
  }                                                                                                           \
  extern "C" __global__ void accl_scale_##name(void* d, const void* s, const void* k, size_t n) {             \
    scale<ElementOf<nccltype>::type>(d, s, k, n);                                                             \
  }                                                                                                           \
  extern "C" __global__ void accl_divide_##name(void* d, const void* s, int divisor, size_t n) {              \
    divide<ElementOf<nccltype>::type>(d, s, divisor, n);                                                      \
  }

ACCL_TYPE_KERNELS(int8, ncclInt8)
ACCL_TYPE_KERNELS(uint8, ncclUint8)
ACCL_TYPE_KERNELS(int32, ncclInt32)
ACCL_TYPE_KERNELS(uint32, ncclUint32)
ACCL_TYPE_KERNELS(int64, ncclInt64)
ACCL_TYPE_KERNELS(uint64, ncclUint64)
ACCL_TYPE_KERNELS(float16, ncclFloat16)
ACCL_TYPE_KERNELS(float32, ncclFloat32)
ACCL_TYPE_KERNELS(float64, ncclFloat64)
ACCL_TYPE_KERNELS(bfloat16, ncclBfloat16)
ACCL_TYPE_KERNELS(float8e4m3, ncclFloat8e4m3)
ACCL_TYPE_KERNELS(float8e5m2, ncclFloat8e5m2)

// Bytes, 16 at a time where both ends allow it (the ring pieces and user buffers usually do).
extern "C" __global__ void accl_copy(void* dstv, const void* srcv, size_t bytes) {
  char* dst = static_cast<char*>(dstv);
  const char* src = static_cast<const char*>(srcv);
  size_t head = 0;
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
    const size_t vecs = bytes / 16;
    for (size_t i = firstIndex(); i < vecs; i += gridStride())
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    head = vecs * 16;
  }
  for (size_t i = head + firstIndex(); i < bytes; i += gridStride()) dst[i] = src[i];
}

// Stream gates (ACCL_CUDA_STREAM_SYNC=kernel; the default uses stream memory operations): one
// thread writes or waits on a 64-bit flag in mapped host memory that the backend's worker
// thread reads and writes. Kernels, unlike memory operations, are captured by every CUDA graph
// version, at the cost of one resident thread while waiting.
extern "C" __global__ void accl_write_flag(unsigned long long* flag, unsigned long long value) {
  __threadfence_system();  // the stream's earlier writes are visible before the flag is
  *reinterpret_cast<volatile unsigned long long*>(flag) = value;
}

extern "C" __global__ void accl_wait_flag(const unsigned long long* flag, unsigned long long value, int equal) {
  const volatile unsigned long long* f = flag;
  if (equal) {
    while (*f != value) {
    }
  } else {
    while (static_cast<long long>(*f - value) < 0) {
    }
  }
  __threadfence_system();
}
