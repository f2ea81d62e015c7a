// Conversions between float and float16 / bfloat16 / fp8, checked exhaustively over every
// encoding and at every rounding midpoint against the model in device_reference.h, and
// (where the CPU has F16C) against the hardware float16 conversions.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <random>
#include <vector>

#include "device_reference.h"
#include "kernels/device.h"

namespace {

using accl::test::NarrowFormat;

struct FormatUnderTest {
  const char* name;
  const NarrowFormat* format;
  float (*toFloat)(uint32_t);
  uint32_t (*fromFloat)(float);
};

const FormatUnderTest kFormats[] = {
    {"float16", &accl::test::kHalf, [](uint32_t v) { return accl::dev::halfToFloat(static_cast<uint16_t>(v)); },
     [](float f) -> uint32_t { return accl::dev::floatToHalf(f); }},
    {"bfloat16", &accl::test::kBf16, [](uint32_t v) { return accl::dev::bf16ToFloat(static_cast<uint16_t>(v)); },
     [](float f) -> uint32_t { return accl::dev::floatToBf16(f); }},
    {"e4m3", &accl::test::kE4m3, [](uint32_t v) { return accl::dev::fp8e4m3ToFloat(static_cast<uint8_t>(v)); },
     [](float f) -> uint32_t { return accl::dev::floatToFp8e4m3(f); }},
    {"e5m2", &accl::test::kE5m2, [](uint32_t v) { return accl::dev::fp8e5m2ToFloat(static_cast<uint8_t>(v)); },
     [](float f) -> uint32_t { return accl::dev::floatToFp8e5m2(f); }},
};

uint32_t expectedNarrowNan(const FormatUnderTest& t) { return t.format->width() == 8 ? 0x7fu : 0u; }

// Checks one conversion from float against the model; NaN must stay NaN (and be canonical 0x7f
// for fp8).
void expectConvertsLikeReference(const FormatUnderTest& t, float f) {
  const uint32_t actual = t.fromFloat(f);
  if (std::isnan(f)) {
    if (t.format->width() == 8) {
      EXPECT_EQ(actual, 0x7fu) << t.name << " NaN";
    } else {
      EXPECT_TRUE(t.format->isNan(actual)) << t.name << " NaN input gave 0x" << std::hex << actual;
    }
    return;
  }
  const uint32_t expected = t.format->encode(static_cast<double>(f), expectedNarrowNan(t));
  EXPECT_EQ(actual, expected) << t.name << " from float " << f << " (bits 0x" << std::hex << std::bit_cast<uint32_t>(f)
                              << ")";
}

TEST(FloatFormats, EveryEncodingWidensToItsExactValue) {
  for (const auto& t : kFormats) {
    const uint32_t count = 1u << t.format->width();
    for (uint32_t code = 0; code < count; ++code) {
      const float actual = t.toFloat(code);
      const double expected = t.format->decode(code);
      if (std::isnan(expected)) {
        ASSERT_TRUE(std::isnan(actual)) << t.name << " code 0x" << std::hex << code;
      } else {
        ASSERT_EQ(static_cast<double>(actual), expected) << t.name << " code 0x" << std::hex << code;
        ASSERT_EQ(std::signbit(actual), std::signbit(expected)) << t.name << " code 0x" << std::hex << code;
      }
    }
  }
}

TEST(FloatFormats, EveryFiniteEncodingSurvivesARoundTripThroughFloat) {
  for (const auto& t : kFormats) {
    const uint32_t count = 1u << t.format->width();
    for (uint32_t code = 0; code < count; ++code) {
      if (t.format->isNan(code)) {
        ASSERT_TRUE(t.format->isNan(t.fromFloat(t.toFloat(code)))) << t.name << " code 0x" << std::hex << code;
        continue;
      }
      // Saturating formats (fp8 e5m2) turn inf into the largest finite value on the way back.
      const bool saturatedInfinity = t.format->saturates && std::isinf(t.format->decode(code));
      const uint32_t expected = saturatedInfinity ? (code & t.format->signBit()) | t.format->maxFinite : code;
      ASSERT_EQ(t.fromFloat(t.toFloat(code)), expected) << t.name << " code 0x" << std::hex << code;
    }
  }
}

// Between each pair of neighbouring encodings: the exact midpoint (a tie: goes to the even
// encoding) and the floats just either side of it (go to the nearer one).
TEST(FloatFormats, ValuesAtAndAroundEveryMidpointRoundToNearestEven) {
  for (const auto& t : kFormats) {
    for (uint32_t code = 0; code < t.format->maxFinite; ++code) {
      const double low = t.format->decode(code);
      const double high = t.format->decode(code + 1);
      const float mid = static_cast<float>((low + high) / 2);
      ASSERT_EQ(static_cast<double>(mid), (low + high) / 2) << "midpoint must be exact in float";
      for (float sign : {1.0f, -1.0f}) {
        expectConvertsLikeReference(t, sign * mid);
        expectConvertsLikeReference(t, sign * std::nextafter(mid, 0.0f));
        expectConvertsLikeReference(t, sign * std::nextafter(mid, std::numeric_limits<float>::infinity()));
        expectConvertsLikeReference(t, sign * static_cast<float>(low));
      }
    }
  }
}

TEST(FloatFormats, RandomFloatsConvertLikeTheReference) {
  std::mt19937 rng(12345);
  for (const auto& t : kFormats) {
    for (int i = 0; i < 300000; ++i) {
      expectConvertsLikeReference(t, std::bit_cast<float>(static_cast<uint32_t>(rng())));
      // Also values in the format's own range, where the interesting rounding happens.
      const double scale = std::ldexp(1.0, static_cast<int>(rng() % 40) - 24);
      expectConvertsLikeReference(t, static_cast<float>(std::uniform_real_distribution<double>(-1, 1)(rng) * scale));
    }
  }
}

TEST(FloatFormats, Float16OverflowsToInfinityAndKeepsInfinityAndNan) {
  using accl::dev::floatToHalf;
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bffu);
  EXPECT_EQ(floatToHalf(65519.99f), 0x7bffu);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00u);  // the tie rounds to even: past max, so inf
  EXPECT_EQ(floatToHalf(1e10f), 0x7c00u);
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00u);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::infinity()), 0x7c00u);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00u);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001u);  // smallest subnormal
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000u);  // tie between 0 and the smallest: even is 0
  EXPECT_EQ(floatToHalf(0x1.8p-25f), 0x0001u);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000u);
  const uint16_t nan = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7e00u, 0x7e00u);  // quiet NaN
  EXPECT_TRUE(std::isinf(accl::dev::halfToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(accl::dev::halfToFloat(0x7c01)));
}

TEST(FloatFormats, Bfloat16RoundsToNearestEvenAndKeepsNanQuiet) {
  using accl::dev::floatToBf16;
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0x3f808000u)), 0x3f80u);  // tie, even stays
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0x3f818000u)), 0x3f82u);  // tie, odd rounds up
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0x3f808001u)), 0x3f81u);
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80u);  // FLT_MAX rounds to inf
  // A signalling NaN whose payload sits only in the low half must not become inf.
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0u);
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0xffc00000u)), 0xffc0u);
}

TEST(FloatFormats, Fp8SaturatesToMaxFiniteAndMapsNanToCanonicalNan) {
  using accl::dev::floatToFp8e4m3;
  using accl::dev::floatToFp8e5m2;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(floatToFp8e4m3(448.0f), 0x7eu);
  EXPECT_EQ(floatToFp8e4m3(464.0f), 0x7eu);  // would round to 480 (NaN encoding): saturates
  EXPECT_EQ(floatToFp8e4m3(1e6f), 0x7eu);
  EXPECT_EQ(floatToFp8e4m3(-1e6f), 0xfeu);
  EXPECT_EQ(floatToFp8e4m3(inf), 0x7eu);
  EXPECT_EQ(floatToFp8e4m3(-inf), 0xfeu);
  EXPECT_EQ(floatToFp8e4m3(nan), 0x7fu);
  EXPECT_EQ(floatToFp8e4m3(-nan), 0x7fu);
  EXPECT_EQ(floatToFp8e4m3(0x1p-9f), 0x01u);  // smallest subnormal
  EXPECT_EQ(floatToFp8e4m3(0x1p-10f), 0x00u);  // tie with 0: even
  EXPECT_EQ(floatToFp8e5m2(57344.0f), 0x7bu);
  EXPECT_EQ(floatToFp8e5m2(1e9f), 0x7bu);
  EXPECT_EQ(floatToFp8e5m2(inf), 0x7bu);
  EXPECT_EQ(floatToFp8e5m2(-inf), 0xfbu);
  EXPECT_EQ(floatToFp8e5m2(nan), 0x7fu);
  EXPECT_TRUE(std::isnan(accl::dev::fp8e4m3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(accl::dev::fp8e4m3ToFloat(0xff)));
  EXPECT_EQ(accl::dev::fp8e4m3ToFloat(0x7e), 448.0f);
  EXPECT_TRUE(std::isinf(accl::dev::fp8e5m2ToFloat(0x7c)));
  EXPECT_TRUE(std::isnan(accl::dev::fp8e5m2ToFloat(0x7d)));
}

// The AVX2 kernel table converts float16 with F16C; the scalar code must give the same bits,
// NaN payloads included, or results would depend on the CPU and the array length.
__attribute__((target("f16c"))) float hardwareHalfToFloat(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t hardwareFloatToHalf(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

TEST(FloatFormats, Float16ConversionsMatchTheF16cInstructionsBitForBit) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "CPU has no F16C";
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(std::bit_cast<uint32_t>(accl::dev::halfToFloat(static_cast<uint16_t>(h))),
              std::bit_cast<uint32_t>(hardwareHalfToFloat(static_cast<uint16_t>(h))))
        << "half 0x" << std::hex << h;
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    ASSERT_EQ(accl::dev::floatToHalf(f), hardwareFloatToHalf(f)) << "float bits 0x" << std::hex << std::bit_cast<uint32_t>(f);
  }
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // midpoints and their neighbours
    const float mid = static_cast<float>((accl::test::kHalf.decode(h) + accl::test::kHalf.decode(h + 1)) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), -mid}) {
      ASSERT_EQ(accl::dev::floatToHalf(f), hardwareFloatToHalf(f)) << f;
    }
  }
}

}  // namespace
