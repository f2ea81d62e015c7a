// kernel_loops.h: the element loops behind every KernelTable entry, written once as templates
// over (element type, operator). Each includer compiles them for one instruction set (baseline
// x86-64 in kernels_baseline.cc, AVX2+F16C in kernels_avx2.cc), so everything here has internal
// linkage: a shared weak instantiation would let the linker hand AVX2 code to a baseline CPU.
// Include element_types.h and kernel_table.h before any `#pragma GCC target`, then this file;
// define ACCL_KERNELS_F16C when the target has F16C (g++ does not define __F16C__ for a pragma).
#pragma once
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "host/element_types.h"
#include "host/kernel_table.h"

#if defined(ACCL_KERNELS_F16C)
#include <immintrin.h>
#endif

namespace accl::dev::host {
namespace {

template <class E, class Op>
struct Reduce2Kernel {
  static void run(void* dstv, const void* av, const void* bv, size_t count) {
    using S = typename E::Storage;
    S* dst = static_cast<S*>(dstv);
    const S* a = static_cast<const S*>(av);
    const S* b = static_cast<const S*>(bv);
    for (size_t i = 0; i < count; ++i) dst[i] = E::narrow(Op::apply(E::widen(a[i]), E::widen(b[i])));
  }
};

#if defined(ACCL_KERNELS_F16C)
// g++ 12 does not vectorise the F16C conversions on its own, so float16 gets an explicit
// 8-wide loop; the arithmetic in between stays the generic Op, which g++ packs into one ymm.
template <class Op>
struct Reduce2Kernel<Float16Element, Op> {
  static void run(void* dstv, const void* av, const void* bv, size_t count) {
    uint16_t* dst = static_cast<uint16_t*>(dstv);
    const uint16_t* a = static_cast<const uint16_t*>(av);
    const uint16_t* b = static_cast<const uint16_t*>(bv);
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
      alignas(32) float x[8];
      alignas(32) float y[8];
      _mm256_store_ps(x, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i))));
      _mm256_store_ps(y, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i))));
      for (int j = 0; j < 8; ++j) x[j] = Op::apply(x[j], y[j]);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm256_cvtps_ph(_mm256_load_ps(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < count; ++i) dst[i] = floatToHalfBits(Op::apply(halfBitsToFloat(a[i]), halfBitsToFloat(b[i])));
  }
};
#endif

// PreMulSum: dst = src * scalar, with the same wrap/rounding rules as ProdOp.
template <class E>
struct ScaleKernel {
  static void run(void* dstv, const void* srcv, const void* scalarBytes, size_t count) {
    using S = typename E::Storage;
    S scalarStorage;
    std::memcpy(&scalarStorage, scalarBytes, sizeof(S));
    const typename E::Compute scalar = E::widen(scalarStorage);
    S* dst = static_cast<S*>(dstv);
    const S* src = static_cast<const S*>(srcv);
    for (size_t i = 0; i < count; ++i) dst[i] = E::narrow(ProdOp::apply(E::widen(src[i]), scalar));
  }
};

// Avg: dst = src / divisor (divideOne in element_types.h). Integer types need divisor >= 1,
// which divide() in scale.cc checks.
template <class E>
struct DivideKernel {
  static void run(void* dstv, const void* srcv, int divisor, size_t count) {
    using S = typename E::Storage;
    S* dst = static_cast<S*>(dstv);
    const S* src = static_cast<const S*>(srcv);
    for (size_t i = 0; i < count; ++i) dst[i] = divideOne<E>(src[i], divisor);
  }
};

template <ncclDataType_t Type>
constexpr void fillKernelsOfType(KernelTable& table) {
  using E = typename ElementOf<Type>::type;
  table.reduce2[Type][0] = &Reduce2Kernel<E, SumOp>::run;
  table.reduce2[Type][1] = &Reduce2Kernel<E, ProdOp>::run;
  table.reduce2[Type][2] = &Reduce2Kernel<E, MaxOp>::run;
  table.reduce2[Type][3] = &Reduce2Kernel<E, MinOp>::run;
  table.scale[Type] = &ScaleKernel<E>::run;
  table.divide[Type] = &DivideKernel<E>::run;
}

template <size_t... Types>
constexpr KernelTable makeKernelTable(std::index_sequence<Types...>) {
  KernelTable table{};
  (fillKernelsOfType<static_cast<ncclDataType_t>(Types)>(table), ...);
  return table;
}

constexpr KernelTable makeKernelTable() { return makeKernelTable(std::make_index_sequence<ncclNumTypes>{}); }

}  // namespace
}  // namespace accl::dev::host
