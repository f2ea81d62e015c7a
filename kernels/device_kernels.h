// device_kernels.h: the device kernels, written once (portable.h says how they compile for
// CUDA, HIP and the CPU emulation the fake CUDA driver runs). The element arithmetic is
// kernels/host/element_types.h itself (constexpr; nvcc compiles it with --expt-relaxed-constexpr),
// so device results are bitwise those of the host backend. Entry points are extern "C" so the
// backend finds them by name:
//   accl_reduce2_<type>_<op>(dst, a, b, count)   op: sum prod max min
//   accl_scale_<type>(dst, src, scalarPtr, count) scalar read from device or mapped memory
//   accl_divide_<type>(dst, src, divisor, count)
//   accl_copy(dst, src, bytes)                   16-byte vectors where both ends allow it
//   accl_write_flag(flag, value) / accl_wait_flag(flag, value, equal)   (tests only)
//   accl_coll_<type>_<op>(args) / accl_staged(args)   the collective and staged kernels
// <type> is dev::typeName's spelling (kernels/host/type_info.cc): the backend builds names from it.
#pragma once
#include <cstddef>
#include <cstdint>
#include "host/element_types.h"
#include "portable.h"

namespace accl::kern::body {

using namespace accl::dev::host;

template <class E, class Op>
ACCL_DEV void reduce2(void* dstv, const void* av, const void* bv, size_t count) {
  using S = typename E::Storage;
  S* dst = static_cast<S*>(dstv);
  const S* a = static_cast<const S*>(av);
  const S* b = static_cast<const S*>(bv);
  for (size_t i = globalThread(); i < count; i += gridThreads()) dst[i] = E::narrow(Op::apply(E::widen(a[i]), E::widen(b[i])));
}

template <class E>
ACCL_DEV void scale(void* dstv, const void* srcv, const void* scalarv, size_t count) {
  using S = typename E::Storage;
  S* dst = static_cast<S*>(dstv);
  const S* src = static_cast<const S*>(srcv);
  const typename E::Compute scalar = E::widen(*static_cast<const S*>(scalarv));
  for (size_t i = globalThread(); i < count; i += gridThreads()) dst[i] = E::narrow(ProdOp::apply(E::widen(src[i]), scalar));
}

template <class E>
ACCL_DEV void divide(void* dstv, const void* srcv, int divisor, size_t count) {
  using S = typename E::Storage;
  S* dst = static_cast<S*>(dstv);
  const S* src = static_cast<const S*>(srcv);
  for (size_t i = globalThread(); i < count; i += gridThreads()) dst[i] = divideOne<E>(src[i], divisor);
}

// The whole grid copies (portable.h's stridedCopy: vectors only where both ends allow them).
ACCL_DEV void copy(void* dstv, const void* srcv, size_t bytes) {
  stridedCopy(static_cast<char*>(dstv), static_cast<const char*>(srcv), bytes, globalThread(), gridThreads());
}

}  // namespace accl::kern::body

#define ACCL_TYPE_KERNELS(name, nccltype)                                                                   \
  ACCL_KERNEL_NAMED(accl_reduce2_##name##_sum, (void* d, const void* a, const void* b, size_t n)) {         \
    accl::kern::body::reduce2<accl::dev::host::ElementOf<nccltype>::type, accl::dev::host::SumOp>(d, a, b, n); \
  }                                                                                                         \
  ACCL_KERNEL_NAMED(accl_reduce2_##name##_prod, (void* d, const void* a, const void* b, size_t n)) {        \
    accl::kern::body::reduce2<accl::dev::host::ElementOf<nccltype>::type, accl::dev::host::ProdOp>(d, a, b, n); \
  }                                                                                                         \
  ACCL_KERNEL_NAMED(accl_reduce2_##name##_max, (void* d, const void* a, const void* b, size_t n)) {         \
    accl::kern::body::reduce2<accl::dev::host::ElementOf<nccltype>::type, accl::dev::host::MaxOp>(d, a, b, n); \
  }                                                                                                         \
  ACCL_KERNEL_NAMED(accl_reduce2_##name##_min, (void* d, const void* a, const void* b, size_t n)) {         \
    accl::kern::body::reduce2<accl::dev::host::ElementOf<nccltype>::type, accl::dev::host::MinOp>(d, a, b, n); \
  }                                                                                                         \
  ACCL_KERNEL_NAMED(accl_scale_##name, (void* d, const void* s, const void* k, size_t n)) {                 \
    accl::kern::body::scale<accl::dev::host::ElementOf<nccltype>::type>(d, s, k, n);                        \
  }                                                                                                         \
  ACCL_KERNEL_NAMED(accl_divide_##name, (void* d, const void* s, int divisor, size_t n)) {                  \
    accl::kern::body::divide<accl::dev::host::ElementOf<nccltype>::type>(d, s, divisor, n);                 \
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

ACCL_KERNEL_NAMED(accl_copy, (void* dst, const void* src, size_t bytes)) { accl::kern::body::copy(dst, src, bytes); }

// One thread writes or waits on a 64-bit flag in mapped host memory. The library launches
// neither (they served the gate model, removed); the fake driver's rule tests use them as the
// kernel that blocks a hardware queue (tests/fake_cuda/driver_rules_test.cc).
ACCL_KERNEL_NAMED(accl_write_flag, (unsigned long long* flag, unsigned long long value)) {
  accl::kern::storeRelease(reinterpret_cast<uint64_t*>(flag), value);  // the stream's earlier writes first
}

ACCL_KERNEL_NAMED(accl_wait_flag, (const unsigned long long* flag, unsigned long long value, int equal)) {
  const uint64_t* f = reinterpret_cast<const uint64_t*>(flag);
  for (;;) {
    const uint64_t seen = accl::kern::loadAcquire(f);
    if (equal ? seen == value : static_cast<int64_t>(seen - value) >= 0) break;
    accl::kern::spinPause();
  }
}

// The collective kernel (the CUDA backend's execution model): one launch per collective.
#include "collective_kernel.h"

// The staged kernel (communicators the collective kernel cannot serve): one launch per call.
#include "staged_kernel.h"

// The direct kernel (ranks of one process that reach each other's buffers): one launch per call.
#include "direct_kernel.h"

// The LL kernel (calls up to 64 KiB among ranks that reach each other's mailboxes): one pass.
#include "ll_kernel.h"
