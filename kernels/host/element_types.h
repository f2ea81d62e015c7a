// element_types.h: what each ncclDataType_t is in memory (Storage), what arithmetic is done in
// (Compute), and the four reduction operators. The loops in kernel_loops.h are written once
// against these, so every (type, op) pair gets its own straight-line, vectorisable loop.
#pragma once
#include <cstdint>
#include <type_traits>

#include "host/float_formats.h"
#include "nccl.h"

namespace accl::dev::host {

// Integers and float/double are computed in their own type.
template <class T>
struct NativeElement {
  using Storage = T;
  using Compute = T;
  [[gnu::always_inline]] static constexpr Compute widen(Storage v) { return v; }
  [[gnu::always_inline]] static constexpr Storage narrow(Compute v) { return v; }
};

// Narrow floats are widened to float and rounded back after every operation, like NCCL's
// kernels; that also makes the result independent of how many inputs a step combines.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
struct Narrow16Element {
  using Storage = uint16_t;
  using Compute = float;
  [[gnu::always_inline]] static constexpr Compute widen(Storage v) { return ToFloat(v); }
  [[gnu::always_inline]] static constexpr Storage narrow(Compute v) { return FromFloat(v); }
};

template <float (*ToFloat)(uint8_t), uint8_t (*FromFloat)(float)>
struct Narrow8Element {
  using Storage = uint8_t;
  using Compute = float;
  [[gnu::always_inline]] static constexpr Compute widen(Storage v) { return ToFloat(v); }
  [[gnu::always_inline]] static constexpr Storage narrow(Compute v) { return FromFloat(v); }
};

using Float16Element = Narrow16Element<halfBitsToFloat, floatToHalfBits>;
using Bfloat16Element = Narrow16Element<bf16BitsToFloat, floatToBf16Bits>;
using Fp8e4m3Element = Narrow8Element<fp8e4m3BitsToFloat, floatToFp8e4m3Bits>;
using Fp8e5m2Element = Narrow8Element<fp8e5m2BitsToFloat, floatToFp8e5m2Bits>;

template <ncclDataType_t Type> struct ElementOf;
template <> struct ElementOf<ncclInt8> { using type = NativeElement<int8_t>; };
template <> struct ElementOf<ncclUint8> { using type = NativeElement<uint8_t>; };
template <> struct ElementOf<ncclInt32> { using type = NativeElement<int32_t>; };
template <> struct ElementOf<ncclUint32> { using type = NativeElement<uint32_t>; };
template <> struct ElementOf<ncclInt64> { using type = NativeElement<int64_t>; };
template <> struct ElementOf<ncclUint64> { using type = NativeElement<uint64_t>; };
template <> struct ElementOf<ncclFloat16> { using type = Float16Element; };
template <> struct ElementOf<ncclFloat32> { using type = NativeElement<float>; };
template <> struct ElementOf<ncclFloat64> { using type = NativeElement<double>; };
template <> struct ElementOf<ncclBfloat16> { using type = Bfloat16Element; };
template <> struct ElementOf<ncclFloat8e4m3> { using type = Fp8e4m3Element; };
template <> struct ElementOf<ncclFloat8e5m2> { using type = Fp8e5m2Element; };

// Integer sums and products wrap: they are done in an unsigned type at least as wide as
// `unsigned`, so neither signed overflow nor the promotion of small types to int is UB.
template <class T>
using WrappingOf = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct SumOp {
  template <class T>
  [[gnu::always_inline]] static constexpr T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrappingOf<T>>(a) + static_cast<WrappingOf<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  template <class T>
  [[gnu::always_inline]] static constexpr T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrappingOf<T>>(a) * static_cast<WrappingOf<T>>(b));
    } else {
      return a * b;
    }
  }
};

// Max/Min propagate NaN: if either input is NaN the result is NaN. A reduction that silently
// drops a NaN would hide a diverged rank; fmax-style "ignore NaN" is the wrong default here.
// The form `(a != a) | (a > b)` also works on GCC vector types (see the F16C loop).
struct MaxOp {
  template <class T>
  [[gnu::always_inline]] static constexpr T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a > b ? a : b;
    } else {
      return ((a != a) | (a > b)) ? a : b;
    }
  }
};

struct MinOp {
  template <class T>
  [[gnu::always_inline]] static constexpr T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? a : b;
    } else {
      return ((a != a) | (a < b)) ? a : b;
    }
  }
};

// Avg: x / divisor, rounded once. The host loops and the device kernels both use this.
template <class E>
[[gnu::always_inline]] constexpr typename E::Storage divideOne(typename E::Storage x, int divisor) {
  using S = typename E::Storage;
  using C = typename E::Compute;
  if constexpr (std::is_integral_v<C> && sizeof(C) <= 4) {
    // There is no SIMD integer division; dividing in double and truncating is exact for
    // 32-bit operands (the rounding error, < |x/d| * 2^-53, is below the 1/d gap to the
    // next integer), and it vectorises.
    return static_cast<S>(static_cast<int64_t>(static_cast<double>(x) / static_cast<double>(divisor)));
  } else if constexpr (std::is_integral_v<C>) {
    return static_cast<S>(x / static_cast<C>(divisor));  // divisor >= 1: no INT64_MIN / -1 overflow
  } else if constexpr (std::is_same_v<S, C>) {
    return x / static_cast<C>(divisor);  // float32 in float, float64 in double: one rounding
  } else {
    // Narrow floats: the divisor is not a narrow value, so float division followed by rounding
    // to the narrow type can round twice the wrong way (x/d just below a tie becomes the tie).
    // Divide in double, round to float with round-to-odd, then to the type: that is exactly
    // one correct rounding, as float has more than two extra bits.
    return E::narrow(roundToOddFloat(static_cast<double>(E::widen(x)) / static_cast<double>(divisor)));
  }
}

}  // namespace accl::dev::host
