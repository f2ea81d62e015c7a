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
  [[gnu::always_inline]] static Compute widen(Storage v) { return v; }
  [[gnu::always_inline]] static Storage narrow(Compute v) { return v; }
};

// Narrow floats are widened to float and rounded back after every operation, like NCCL's
// kernels; that also makes the result independent of how many inputs a step combines.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
struct Narrow16Element {
  using Storage = uint16_t;
  using Compute = float;
  [[gnu::always_inline]] static Compute widen(Storage v) { return ToFloat(v); }
  [[gnu::always_inline]] static Storage narrow(Compute v) { return FromFloat(v); }
};

template <float (*ToFloat)(uint8_t), uint8_t (*FromFloat)(float)>
struct Narrow8Element {
  using Storage = uint8_t;
  using Compute = float;
  [[gnu::always_inline]] static Compute widen(Storage v) { return ToFloat(v); }
  [[gnu::always_inline]] static Storage narrow(Compute v) { return FromFloat(v); }
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
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrappingOf<T>>(a) + static_cast<WrappingOf<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) {
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
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a > b ? a : b;
    } else {
      return ((a != a) | (a > b)) ? a : b;
    }
  }
};

struct MinOp {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? a : b;
    } else {
      return ((a != a) | (a < b)) ? a : b;
    }
  }
};

}  // namespace accl::dev::host
