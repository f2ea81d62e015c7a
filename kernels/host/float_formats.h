// float_formats.h: conversions between float and the narrow floating formats (float16,
// bfloat16, fp8 e4m3, fp8 e5m2), written without branches so that g++ vectorises the loops
// that call them with plain SSE2. Every narrowing rounds to nearest-even.
// Everything here and in element_types.h is constexpr: that is how the device kernels
// (kernels/cuda/, nvcc --expt-relaxed-constexpr; hipcc alike) call the very same arithmetic,
// so device and host reductions round identically, without CUDA-only markers in this file.
#pragma once
#include <bit>
#include <cstdint>

namespace accl::dev::host {

// cond ? a : b as bit masks. With ternaries g++ turns these functions into branches, sinks
// the float arithmetic into them (it could trap, so it is not speculated back), and then
// cannot vectorise the loops that call them.
[[gnu::always_inline]] constexpr uint32_t selectBits(bool cond, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return (a & mask) | (b & ~mask);
}

// ---- float16 (IEEE binary16) ---------------------------------------------------------------

[[gnu::always_inline]] constexpr float halfBitsToFloat(uint16_t h) {
  const uint32_t magnitude = h & 0x7fffu;
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  // Normal numbers only need the exponent rebiased (15 -> 127).
  const uint32_t normal = (magnitude << 13) + ((127u - 15u) << 23);
  // Inf/NaN keep their mantissa; a NaN gets the quiet bit, as the F16C instruction does.
  const uint32_t infOrNan = (magnitude << 13) | 0x7f800000u | selectBits(magnitude > 0x7c00u, 0x00400000u, 0u);
  // Subnormals (and zero) are mantissa * 2^-24, exact in float.
  const uint32_t subnormal = std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-24f);
  const uint32_t bits = selectBits(magnitude >= 0x7c00u, infOrNan, selectBits(magnitude < 0x0400u, subnormal, normal));
  return std::bit_cast<float>(bits | sign);
}

[[gnu::always_inline]] constexpr uint16_t floatToHalfBits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  // Normal range: rebias, then add just under half an ulp plus the kept LSB: ties go to even.
  const uint32_t normal = (a - ((127u - 15u) << 23) + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  // Subnormal range: adding 0.5f lines the float ulp up with the half subnormal ulp (2^-24),
  // so the FPU does the round-to-nearest-even; what is left above 0.5 is the half encoding.
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(a) + 0.5f) - std::bit_cast<uint32_t>(0.5f);
  uint32_t bits = selectBits(a < 0x38800000u, subnormal, normal);  // 2^-14, smallest normal
  bits = selectBits(a >= 0x477ff000u, 0x7c00u, bits);             // >= 65520 rounds past 65504: inf
  // NaN stays NaN: quiet bit plus the top of the payload (what F16C produces).
  bits = selectBits(a > 0x7f800000u, 0x7e00u | ((a >> 13) & 0x3ffu), bits);
  return static_cast<uint16_t>(bits | sign);
}

// ---- bfloat16 (top half of a float) --------------------------------------------------------

[[gnu::always_inline]] constexpr float bf16BitsToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

[[gnu::always_inline]] constexpr uint16_t floatToBf16Bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // overflow carries into inf
  const uint32_t quietNan = (u >> 16) | 0x0040u;                    // rounding could make it inf
  const bool isNan = (u & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(selectBits(isNan, quietNan, rounded));
}

// ---- fp8 e4m3 (bias 7, no infinities, max finite 448, NaN = S.1111.111) --------------------

inline constexpr uint32_t kCanonicalFloatNan = 0x7fc00000u;

[[gnu::always_inline]] constexpr float fp8e4m3BitsToFloat(uint8_t v) {
  const uint32_t magnitude = v & 0x7fu;
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t normal = (magnitude << 20) + ((127u - 7u) << 23);
  const uint32_t subnormal = std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-9f);
  uint32_t bits = selectBits(magnitude < 0x08u, subnormal, normal) | sign;
  bits = selectBits(magnitude == 0x7fu, kCanonicalFloatNan, bits); // NaN loses its sign, as in CUDA
  return std::bit_cast<float>(bits);
}

// Saturating (CUDA's __NV_SATFINITE): anything beyond 448, inf included, becomes +-448.
[[gnu::always_inline]] constexpr uint8_t floatToFp8e4m3Bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t normal = (a - ((127u - 7u) << 23) + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
  // 2^14 has a float ulp of 2^-9, the e4m3 subnormal ulp (see floatToHalfBits).
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(a) + 0x1p14f) - std::bit_cast<uint32_t>(0x1p14f);
  uint32_t bits = selectBits(a < 0x3c800000u, subnormal, normal);  // 2^-6, smallest normal
  bits = selectBits(bits > 0x7eu, 0x7eu, bits); // 0x7f would be NaN: saturate
  bits |= sign;
  bits = selectBits(a > 0x7f800000u, 0x7fu, bits);  // canonical NaN, positive like CUDA's
  return static_cast<uint8_t>(bits);
}

// ---- fp8 e5m2 (bias 15, IEEE-like: the top byte of a float16) ------------------------------

[[gnu::always_inline]] constexpr float fp8e5m2BitsToFloat(uint8_t v) {
  return halfBitsToFloat(static_cast<uint16_t>(v << 8));
}

// Saturating: anything beyond 57344, inf included, becomes +-57344 (0x7b).
[[gnu::always_inline]] constexpr uint8_t floatToFp8e5m2Bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t normal = (a - ((127u - 15u) << 23) + 0xfffffu + ((a >> 21) & 1u)) >> 21;
  // 2^7 has a float ulp of 2^-16, the e5m2 subnormal ulp.
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(a) + 0x1p7f) - std::bit_cast<uint32_t>(0x1p7f);
  uint32_t bits = selectBits(a < 0x38800000u, subnormal, normal);  // 2^-14, smallest normal
  bits = selectBits(bits > 0x7bu, 0x7bu, bits);
  bits |= sign;
  bits = selectBits(a > 0x7f800000u, 0x7fu, bits);
  return static_cast<uint8_t>(bits);
}

// ---- division for Avg ------------------------------------------------------------------------

// double -> float, rounding to the neighbour whose last mantissa bit is 1 when inexact. A later
// round-to-nearest to a format with at least two fewer bits then gives the correctly rounded result.
[[gnu::always_inline]] constexpr float roundToOddFloat(double q) {
  const float nearest = static_cast<float>(q);
  const uint32_t bits = std::bit_cast<uint32_t>(nearest);
  const bool needsOdd = static_cast<double>(nearest) != q && (bits & 1u) == 0;
  // nearest and q have the same sign, so |nearest| > |q| is a signed comparison.
  const bool awayFromZero = q < 0 ? static_cast<double>(nearest) < q : static_cast<double>(nearest) > q;
  // Sign-magnitude: bits - 1 moves towards zero, bits + 1 away from it.
  const uint32_t towardQ = awayFromZero ? bits - 1 : bits + 1;
  return std::bit_cast<float>(needsOdd ? towardQ : bits);
}

}  // namespace accl::dev::host
