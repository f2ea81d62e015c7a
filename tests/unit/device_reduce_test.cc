// reduce2 / reduceN over every data type and operator, against the element-by-element model in
// device_reference.h, at odd lengths and with the in-place aliasing the collectives rely on.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "device_reference.h"
#include "device_test_inputs.h"
#include "kernels/device.h"
#include "kernels/host/kernel_table.h"

namespace {

using accl::dev::RedKind;
using accl::test::kAllTypes;
using accl::test::kOddCounts;
using accl::test::referenceOp;
using accl::test::sameResult;

constexpr RedKind kAllOps[] = {RedKind::Sum, RedKind::Prod, RedKind::Max, RedKind::Min};

const char* opName(RedKind op) {
  switch (op) {
    case RedKind::Sum: return "sum";
    case RedKind::Prod: return "prod";
    case RedKind::Max: return "max";
    default: return "min";
  }
}

// Floats of a magnitude that sums and products round rather than overflow.
std::vector<uint8_t> randomElements(ncclDataType_t type, size_t count, uint32_t seed) {
  std::uniform_real_distribution<double> moderate(-60.0, 60.0);
  return accl::test::randomElements(type, count, seed,
                                    [&](std::mt19937_64& rng) { return moderate(rng) / (1 << (rng() % 8)); });
}

std::vector<uint64_t> referenceReduce2(ncclDataType_t type, RedKind op, const std::vector<uint8_t>& a,
                                       const std::vector<uint8_t>& b, size_t count) {
  const size_t size = accl::dev::typeSize(type);
  std::vector<uint64_t> expected(count);
  for (size_t i = 0; i < count; ++i) {
    expected[i] = referenceOp(type, static_cast<int>(op), accl::test::loadBits(&a[i * size], size),
                              accl::test::loadBits(&b[i * size], size), size);
  }
  return expected;
}

// Stops at the first mismatch: a million identical failures help nobody.
void expectMatches(ncclDataType_t type, const std::vector<uint64_t>& expected, const void* actual, size_t count,
                   const std::string& what) {
  const size_t size = accl::dev::typeSize(type);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t got = accl::test::loadBits(static_cast<const uint8_t*>(actual) + i * size, size);
    if (!sameResult(type, expected[i], got)) {
      ADD_FAILURE() << what << ": element " << i << " expected 0x" << std::hex << expected[i] << " got 0x" << got;
      return;
    }
  }
}

std::string describe(ncclDataType_t type, RedKind op, size_t count) {
  return std::string(accl::dev::typeName(type)) + " " + opName(op) + " count " + std::to_string(count);
}

TEST(Reduce, EveryTypeAndOperatorMatchesReferenceForOddCountsInAndOutOfPlace) {
  for (ncclDataType_t type : kAllTypes) {
    const size_t size = accl::dev::typeSize(type);
    const size_t maxCount = kOddCounts[std::size(kOddCounts) - 1];
    const auto a = randomElements(type, maxCount, 1 + type);
    const auto b = randomElements(type, maxCount, 100 + type);
    for (RedKind op : kAllOps) {
      const auto expected = referenceReduce2(type, op, a, b, maxCount);
      for (size_t count : kOddCounts) {
        const std::string what = describe(type, op, count);
        // One element past the end guards against overrun.
        std::vector<uint8_t> dst((count + 1) * size, 0xa5);
        accl::dev::reduce2(type, op, dst.data(), a.data(), b.data(), count);
        expectMatches(type, expected, dst.data(), count, what + " out of place");
        for (size_t i = count * size; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xa5) << what << " wrote past the end";

        std::vector<uint8_t> intoA(a.begin(), a.begin() + count * size);
        accl::dev::reduce2(type, op, intoA.data(), intoA.data(), b.data(), count);
        expectMatches(type, expected, intoA.data(), count, what + " dst aliases a");

        std::vector<uint8_t> intoB(b.begin(), b.begin() + count * size);
        accl::dev::reduce2(type, op, intoB.data(), a.data(), intoB.data(), count);
        expectMatches(type, expected, intoB.data(), count, what + " dst aliases b");
      }
    }
  }
}

TEST(Reduce, SumOfBfloat16MatchesReferenceForOddCounts) {
  for (size_t count : kOddCounts) {
    const auto a = randomElements(ncclBfloat16, count, 5);
    const auto b = randomElements(ncclBfloat16, count, 6);
    std::vector<uint16_t> dst(count);
    accl::dev::reduce2(ncclBfloat16, RedKind::Sum, dst.data(), a.data(), b.data(), count);
    expectMatches(ncclBfloat16, referenceReduce2(ncclBfloat16, RedKind::Sum, a, b, count), dst.data(), count,
                  describe(ncclBfloat16, RedKind::Sum, count));
  }
}

// reduceN folds the sources left to right, rounding after each step; the reference does the
// same one element at a time. The length crosses many internal chunk boundaries.
TEST(Reduce, ManySourcesFoldLeftToRightIntoDstAliasingTheFirstSource) {
  constexpr int kSources = 5;
  for (ncclDataType_t type : kAllTypes) {
    const size_t size = accl::dev::typeSize(type);
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100003}}) {
      std::vector<std::vector<uint8_t>> srcs;
      for (int s = 0; s < kSources; ++s) srcs.push_back(randomElements(type, count, 1000 * s + type));
      for (RedKind op : kAllOps) {
        std::vector<uint64_t> expected(count);
        for (size_t i = 0; i < count; ++i) {
          uint64_t acc = accl::test::loadBits(&srcs[0][i * size], size);
          for (int s = 1; s < kSources; ++s) {
            acc = referenceOp(type, static_cast<int>(op), acc, accl::test::loadBits(&srcs[s][i * size], size), size);
          }
          expected[i] = acc;
        }
        const std::string what = describe(type, op, count);

        std::vector<uint8_t> dst(count * size);
        std::vector<const void*> ptrs;
        for (auto& s : srcs) ptrs.push_back(s.data());
        accl::dev::reduceN(type, op, dst.data(), ptrs.data(), kSources, count);
        expectMatches(type, expected, dst.data(), count, what + " out of place");

        std::vector<uint8_t> first = srcs[0];
        ptrs[0] = first.data();
        accl::dev::reduceN(type, op, first.data(), ptrs.data(), kSources, count);
        expectMatches(type, expected, first.data(), count, what + " dst aliases srcs[0]");
      }
    }
  }
}

TEST(Reduce, OneSourceIsACopyAndTwoSourcesEqualReduce2) {
  const auto a = randomElements(ncclFloat32, 1001, 1);
  const auto b = randomElements(ncclFloat32, 1001, 2);
  std::vector<uint8_t> dst(a.size()), viaReduce2(a.size());
  const void* one[] = {a.data()};
  accl::dev::reduceN(ncclFloat32, RedKind::Sum, dst.data(), one, 1, 1001);
  EXPECT_EQ(dst, a);
  const void* two[] = {a.data(), b.data()};
  accl::dev::reduceN(ncclFloat32, RedKind::Max, dst.data(), two, 2, 1001);
  accl::dev::reduce2(ncclFloat32, RedKind::Max, viaReduce2.data(), a.data(), b.data(), 1001);
  EXPECT_EQ(dst, viaReduce2);
}

template <class T>
T reduceOne(ncclDataType_t type, RedKind op, T a, T b) {
  T out;
  accl::dev::reduce2(type, op, &out, &a, &b, 1);
  return out;
}

TEST(Reduce, IntegerSumsAndProductsWrapAround) {
  EXPECT_EQ(reduceOne<int8_t>(ncclInt8, RedKind::Sum, 127, 1), -128);
  EXPECT_EQ(reduceOne<uint8_t>(ncclUint8, RedKind::Sum, 255, 1), 0);
  EXPECT_EQ(reduceOne<int8_t>(ncclInt8, RedKind::Prod, -128, -1), -128);
  EXPECT_EQ(reduceOne<int32_t>(ncclInt32, RedKind::Sum, std::numeric_limits<int32_t>::max(), 1),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(reduceOne<int32_t>(ncclInt32, RedKind::Prod, 65536, 65536), 0);
  EXPECT_EQ(reduceOne<uint32_t>(ncclUint32, RedKind::Sum, 0xffffffffu, 2), 1u);
  EXPECT_EQ(reduceOne<int64_t>(ncclInt64, RedKind::Sum, std::numeric_limits<int64_t>::max(), 1),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(reduceOne<int64_t>(ncclInt64, RedKind::Prod, std::numeric_limits<int64_t>::min(), -1),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(reduceOne<uint64_t>(ncclUint64, RedKind::Prod, 1ull << 63, 2), 0u);
}

TEST(Reduce, IntegerMaxAndMinCompareSignedTypesAsSigned) {
  EXPECT_EQ(reduceOne<int8_t>(ncclInt8, RedKind::Max, -1, 1), 1);
  EXPECT_EQ(reduceOne<uint8_t>(ncclUint8, RedKind::Max, 0xff, 1), 0xff);
  EXPECT_EQ(reduceOne<int32_t>(ncclInt32, RedKind::Min, -5, 3), -5);
  EXPECT_EQ(reduceOne<uint32_t>(ncclUint32, RedKind::Min, 0xfffffffbu, 3), 3u);
  EXPECT_EQ(reduceOne<int64_t>(ncclInt64, RedKind::Min, std::numeric_limits<int64_t>::min(), 0),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(reduceOne<uint64_t>(ncclUint64, RedKind::Max, ~0ull, 0), ~0ull);
}

TEST(Reduce, MaxAndMinPropagateNanFromEitherSide) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (RedKind op : {RedKind::Max, RedKind::Min}) {
    EXPECT_TRUE(std::isnan(reduceOne<float>(ncclFloat32, op, nan, 1.0f)));
    EXPECT_TRUE(std::isnan(reduceOne<float>(ncclFloat32, op, 1.0f, nan)));
    EXPECT_TRUE(std::isnan(reduceOne<double>(ncclFloat64, op, 1.0, std::numeric_limits<double>::quiet_NaN())));
    EXPECT_TRUE(std::isnan(accl::dev::halfToFloat(reduceOne<uint16_t>(ncclFloat16, op, 0x3c00, 0x7e00))));
    EXPECT_TRUE(std::isnan(accl::dev::bf16ToFloat(reduceOne<uint16_t>(ncclBfloat16, op, 0x7fc0, 0x3f80))));
    EXPECT_EQ(reduceOne<uint8_t>(ncclFloat8e4m3, op, 0x38, 0xff), 0x7f);
    EXPECT_EQ(reduceOne<uint8_t>(ncclFloat8e5m2, op, 0x7e, 0x3c), 0x7f);
  }
}

TEST(Reduce, InfinitiesFollowIeeeAndNarrowTypesOverflowAsSpecified) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(reduceOne<float>(ncclFloat32, RedKind::Sum, inf, -inf)));
  EXPECT_EQ(reduceOne<float>(ncclFloat32, RedKind::Max, inf, 1.0f), inf);
  EXPECT_EQ(reduceOne<uint16_t>(ncclFloat16, RedKind::Sum, 0x7bff, 0x7bff), 0x7c00);  // 65504 * 2: inf
  EXPECT_EQ(reduceOne<uint16_t>(ncclFloat16, RedKind::Sum, 0x7c00, 0x3c00), 0x7c00);
  EXPECT_EQ(reduceOne<uint16_t>(ncclBfloat16, RedKind::Prod, 0x7f7f, 0x4000), 0x7f80);
  // fp8 saturates: 448 + 448 stays 448, 57344 * 2 stays 57344.
  EXPECT_EQ(reduceOne<uint8_t>(ncclFloat8e4m3, RedKind::Sum, 0x7e, 0x7e), 0x7e);
  EXPECT_EQ(reduceOne<uint8_t>(ncclFloat8e4m3, RedKind::Sum, 0xfe, 0xfe), 0xfe);
  EXPECT_EQ(reduceOne<uint8_t>(ncclFloat8e5m2, RedKind::Prod, 0x7b, 0x40), 0x7b);
  EXPECT_EQ(reduceOne<uint8_t>(ncclFloat8e5m2, RedKind::Sum, 0x7c, 0x3c), 0x7b);  // inf + 1 saturates
}

// Narrow floats round after every operation: 2048 + 1 + 1 in float16 is 2048 (each +1 is a tie
// that rounds to even), not the 2050 a float accumulator would give.
TEST(Reduce, NarrowFloatsRoundAfterEveryStepOfAManySourceReduction) {
  const uint16_t big = accl::dev::floatToHalf(2048.0f), one = accl::dev::floatToHalf(1.0f);
  const void* srcs[] = {&big, &one, &one};
  uint16_t out = 0;
  accl::dev::reduceN(ncclFloat16, RedKind::Sum, &out, srcs, 3, 1);
  EXPECT_EQ(accl::dev::halfToFloat(out), 2048.0f);
}

// This machine runs the AVX2 table, so the baseline (SSE2) table is checked against it: both
// must give the same bits for every type and operator, NaN payloads included.
TEST(Reduce, BaselineAndAvx2KernelsGiveIdenticalBits) {
  if (!accl::dev::host::cpuHasAvx2F16c()) GTEST_SKIP() << "CPU has no AVX2/F16C";
  const auto& baseline = accl::dev::host::baselineKernels();
  const auto& avx2 = accl::dev::host::avx2Kernels();
  constexpr size_t kCount = 4099;
  for (ncclDataType_t type : kAllTypes) {
    const auto a = randomElements(type, kCount, 77 + type);
    const auto b = randomElements(type, kCount, 99 + type);
    for (RedKind op : kAllOps) {
      std::vector<uint8_t> x(a.size()), y(a.size());
      baseline.reduce2[type][static_cast<int>(op)](x.data(), a.data(), b.data(), kCount);
      avx2.reduce2[type][static_cast<int>(op)](y.data(), a.data(), b.data(), kCount);
      EXPECT_EQ(x, y) << describe(type, op, kCount);
    }
    const auto scalar = randomElements(type, 1, 5);
    std::vector<uint8_t> x(a.size()), y(a.size());
    baseline.scale[type](x.data(), a.data(), scalar.data(), kCount);
    avx2.scale[type](y.data(), a.data(), scalar.data(), kCount);
    EXPECT_EQ(x, y) << accl::dev::typeName(type) << " scale";
    baseline.divide[type](x.data(), a.data(), 7, kCount);
    avx2.divide[type](y.data(), a.data(), 7, kCount);
    EXPECT_EQ(x, y) << accl::dev::typeName(type) << " divide";
  }
}

TEST(Reduce, InvalidTypeOrOperatorLeavesDstUntouched) {
  float a = 1, b = 2, dst = 5;
  accl::dev::reduce2(static_cast<ncclDataType_t>(ncclNumTypes), RedKind::Sum, &dst, &a, &b, 1);
  accl::dev::reduce2(ncclFloat32, static_cast<RedKind>(7), &dst, &a, &b, 1);
  EXPECT_EQ(dst, 5.0f);
}

}  // namespace
