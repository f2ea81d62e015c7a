// device_reference.h: a slow, obviously-correct model of the narrow float formats and of the
// reductions, for the device_* tests. It works from the format's definition (exponent bits,
// mantissa bits, bias) in double precision with ldexp/nearbyint, and shares no code with
// kernels/host, so a bug in the bit tricks there cannot hide in here too.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "nccl.h"

namespace accl::test {

struct NarrowFormat {
  int expBits;
  int mantBits;
  int bias;
  bool hasInfinity;    // IEEE-like: all-ones exponent is inf/NaN (e4m3: only S.1111.111 is NaN)
  bool saturates;      // out-of-range values become +-max finite instead of inf
  uint32_t maxFinite;  // encoding of the largest finite value

  int width() const { return 1 + expBits + mantBits; }
  uint32_t expMask() const { return (1u << expBits) - 1; }
  uint32_t mantMask() const { return (1u << mantBits) - 1; }
  uint32_t signBit() const { return 1u << (expBits + mantBits); }

  bool isNan(uint32_t code) const {
    const uint32_t e = (code >> mantBits) & expMask();
    const uint32_t m = code & mantMask();
    if (hasInfinity) return e == expMask() && m != 0;
    return e == expMask() && m == mantMask();
  }

  double decode(uint32_t code) const {
    const double sign = (code & signBit()) ? -1.0 : 1.0;
    const uint32_t e = (code >> mantBits) & expMask();
    const uint32_t m = code & mantMask();
    if (isNan(code)) return std::numeric_limits<double>::quiet_NaN();
    if (hasInfinity && e == expMask()) return sign * std::numeric_limits<double>::infinity();
    if (e == 0) return sign * std::ldexp(static_cast<double>(m), 1 - bias - mantBits);
    return sign * std::ldexp(static_cast<double>(m + (1u << mantBits)), static_cast<int>(e) - bias - mantBits);
  }

  // Round to nearest, ties to even. NaN maps to `nanCode` (callers that only care about
  // NaN-ness check isNan of the result instead).
  uint32_t encode(double x, uint32_t nanCode) const {
    if (std::isnan(x)) return nanCode;
    const uint32_t sign = std::signbit(x) ? signBit() : 0u;
    const double ax = std::fabs(x);
    const double maxValue = decode(maxFinite);
    const uint32_t overflowCode = saturates ? maxFinite : ((expMask() << mantBits) | 0u);
    if (std::isinf(ax)) return sign | overflowCode;
    const int minExp = 1 - bias;
    const int exponent = ax == 0.0 ? minExp : std::max(std::ilogb(ax), minExp);
    const double quantum = std::ldexp(1.0, exponent - mantBits);
    const double steps = std::nearbyint(ax / quantum);  // exact scaling, then ties-to-even
    const double rounded = steps * quantum;
    if (rounded > maxValue) return sign | overflowCode;
    if (rounded < std::ldexp(1.0, minExp)) return sign | static_cast<uint32_t>(steps);
    const int e = std::ilogb(rounded);
    const uint32_t m = static_cast<uint32_t>(std::ldexp(rounded, mantBits - e)) - (1u << mantBits);
    return sign | (static_cast<uint32_t>(e + bias) << mantBits) | m;
  }
};

inline constexpr NarrowFormat kHalf{5, 10, 15, true, false, 0x7bff};
inline constexpr NarrowFormat kBf16{8, 7, 127, true, false, 0x7f7f};
inline constexpr NarrowFormat kE4m3{4, 3, 7, false, true, 0x7e};
inline constexpr NarrowFormat kE5m2{5, 2, 15, true, true, 0x7b};

inline const NarrowFormat* narrowFormatOf(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16: return &kHalf;
    case ncclBfloat16: return &kBf16;
    case ncclFloat8e4m3: return &kE4m3;
    case ncclFloat8e5m2: return &kE5m2;
    default: return nullptr;
  }
}

inline bool isIntegerType(ncclDataType_t t) {
  return t == ncclInt8 || t == ncclUint8 || t == ncclInt32 || t == ncclUint32 || t == ncclInt64 || t == ncclUint64;
}
inline bool isSignedInteger(ncclDataType_t t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64; }

inline uint64_t loadBits(const void* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);  // little-endian: low bytes first
  return v;
}
inline void storeBits(void* p, size_t size, uint64_t v) { std::memcpy(p, &v, size); }

inline int64_t signExtend(uint64_t bits, size_t size) {
  if (size == 8) return static_cast<int64_t>(bits);
  const int shift = 64 - 8 * static_cast<int>(size);
  return static_cast<int64_t>(bits << shift) >> shift;
}

// The reference NaN rule for Max/Min: NaN if either input is NaN (documented in element_types.h).
inline double referenceFloatOp(int op, double a, double b) {
  switch (op) {
    case 0: return a + b;
    case 1: return a * b;
    case 2: return (std::isnan(a) || a > b) ? a : b;
    default: return (std::isnan(a) || a < b) ? a : b;
  }
}

// One binary operation on raw element bits, the way the specification reads: integers wrap
// modulo 2^bits, narrow floats are computed exactly in double and rounded once (equivalent to
// float-then-round for these formats, since double has > 2p+2 bits), float32 via double.
inline uint64_t referenceOp(ncclDataType_t t, int op, uint64_t a, uint64_t b, size_t size) {
  if (isIntegerType(t)) {
    const uint64_t mask = size == 8 ? ~0ull : ((1ull << (8 * size)) - 1);
    switch (op) {
      case 0: return (a + b) & mask;
      case 1: return (a * b) & mask;
      default: {
        const bool aGreater = isSignedInteger(t) ? signExtend(a, size) > signExtend(b, size) : a > b;
        const bool pickA = op == 2 ? aGreater : (!aGreater && a != b);
        return pickA ? a : b;
      }
    }
  }
  if (const NarrowFormat* f = narrowFormatOf(t)) {
    const double r = referenceFloatOp(op, f->decode(static_cast<uint32_t>(a)), f->decode(static_cast<uint32_t>(b)));
    return f->encode(r, f == &kE4m3 || f == &kE5m2 ? 0x7fu : (f->expMask() << f->mantBits) | 1u);
  }
  if (t == ncclFloat32) {
    float fa, fb;
    const uint32_t a32 = static_cast<uint32_t>(a), b32 = static_cast<uint32_t>(b);
    std::memcpy(&fa, &a32, 4);
    std::memcpy(&fb, &b32, 4);
    const float r = static_cast<float>(referenceFloatOp(op, fa, fb));
    uint32_t rb;
    std::memcpy(&rb, &r, 4);
    return rb;
  }
  double da, db;
  std::memcpy(&da, &a, 8);
  std::memcpy(&db, &b, 8);
  const double r = referenceFloatOp(op, da, db);
  uint64_t rb;
  std::memcpy(&rb, &r, 8);
  return rb;
}

inline bool isNanBits(ncclDataType_t t, uint64_t bits) {
  if (const NarrowFormat* f = narrowFormatOf(t)) return f->isNan(static_cast<uint32_t>(bits));
  if (t == ncclFloat32) return (bits & 0x7fffffffu) > 0x7f800000u;
  if (t == ncclFloat64) return (bits & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
  return false;
}

// Equal as the tests mean it: same bits, or both NaN (NaN payloads are not specified) —
// except fp8, whose NaN must be the canonical 0x7f.
inline bool sameResult(ncclDataType_t t, uint64_t expected, uint64_t actual) {
  if (t == ncclFloat8e4m3 || t == ncclFloat8e5m2) return expected == actual;
  if (isNanBits(t, expected)) return isNanBits(t, actual);
  return expected == actual;
}

}  // namespace accl::test
