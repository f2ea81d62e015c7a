// scale (PreMulSum) and divide (Avg) over every data type, against device_reference.h.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "device_reference.h"
#include "device_test_inputs.h"
#include "kernels/device.h"

namespace {

using accl::test::kAllTypes;
using accl::test::kOddCounts;

// Floats of a magnitude that scaling and dividing keep in range.
std::vector<uint8_t> randomElements(ncclDataType_t type, size_t count, uint32_t seed) {
  std::uniform_real_distribution<double> moderate(-300.0, 300.0);
  return accl::test::randomElements(type, count, seed, [&](std::mt19937_64& rng) { return moderate(rng); });
}

// Truncating integer division, exact float division rounded once to the type.
uint64_t referenceDivide(ncclDataType_t type, uint64_t bits, int divisor, size_t size) {
  const uint64_t mask = size == 8 ? ~0ull : ((1ull << (8 * size)) - 1);
  if (accl::test::isSignedInteger(type)) {
    return static_cast<uint64_t>(accl::test::signExtend(bits, size) / divisor) & mask;
  }
  if (accl::test::isIntegerType(type)) return bits / static_cast<uint64_t>(divisor);
  if (const auto* f = accl::test::narrowFormatOf(type)) {
    const uint32_t nanCode = f->width() == 8 ? 0x7fu : (f->expMask() << f->mantBits) | 1u;
    return f->encode(f->decode(static_cast<uint32_t>(bits)) / divisor, nanCode);
  }
  if (type == ncclFloat32) {
    const float q = static_cast<float>(static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits))) / divisor);
    return std::bit_cast<uint32_t>(q);
  }
  return std::bit_cast<uint64_t>(std::bit_cast<double>(bits) / divisor);
}

void expectMatches(ncclDataType_t type, const std::vector<uint64_t>& expected, const std::vector<uint8_t>& actual,
                   size_t count, const std::string& what) {
  const size_t size = accl::dev::typeSize(type);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t got = accl::test::loadBits(&actual[i * size], size);
    if (!accl::test::sameResult(type, expected[i], got)) {
      ADD_FAILURE() << what << ": element " << i << " expected 0x" << std::hex << expected[i] << " got 0x" << got;
      return;
    }
  }
}

TEST(Scale, EveryTypeMultipliesByItsScalarLikeTheReferenceInAndOutOfPlace) {
  for (ncclDataType_t type : kAllTypes) {
    const size_t size = accl::dev::typeSize(type);
    const auto src = randomElements(type, kOddCounts[3], 10 + type);
    for (uint32_t scalarSeed : {1u, 2u, 3u}) {
      const auto scalar = randomElements(type, 1, scalarSeed * 31 + type);
      const uint64_t scalarBits = accl::test::loadBits(scalar.data(), size);
      for (size_t count : kOddCounts) {
        const std::string what = std::string(accl::dev::typeName(type)) + " count " + std::to_string(count);
        std::vector<uint64_t> expected(count);
        for (size_t i = 0; i < count; ++i) {
          expected[i] = accl::test::referenceOp(type, 1, accl::test::loadBits(&src[i * size], size), scalarBits, size);
        }
        std::vector<uint8_t> dst(count * size);
        accl::dev::scale(type, dst.data(), src.data(), scalar.data(), count);
        expectMatches(type, expected, dst, count, what + " out of place");
        std::vector<uint8_t> inPlace(src.begin(), src.begin() + count * size);
        accl::dev::scale(type, inPlace.data(), inPlace.data(), scalar.data(), count);
        expectMatches(type, expected, inPlace, count, what + " in place");
      }
    }
  }
}

TEST(Scale, IntegerScalingWrapsAround) {
  int32_t src = std::numeric_limits<int32_t>::max(), scalar = 2, dst = 0;
  accl::dev::scale(ncclInt32, &dst, &src, &scalar, 1);
  EXPECT_EQ(dst, -2);
  uint8_t s8 = 200, k8 = 2, d8 = 0;
  accl::dev::scale(ncclUint8, &d8, &s8, &k8, 1);
  EXPECT_EQ(d8, 144);
}

TEST(Divide, EveryTypeDividesLikeTheReferenceInAndOutOfPlace) {
  for (ncclDataType_t type : kAllTypes) {
    const size_t size = accl::dev::typeSize(type);
    const auto src = randomElements(type, kOddCounts[3], 20 + type);
    for (int divisor : {1, 2, 3, 7, 1000003}) {
      for (size_t count : kOddCounts) {
        const std::string what = std::string(accl::dev::typeName(type)) + " / " + std::to_string(divisor) +
                                 " count " + std::to_string(count);
        std::vector<uint64_t> expected(count);
        for (size_t i = 0; i < count; ++i) {
          expected[i] = referenceDivide(type, accl::test::loadBits(&src[i * size], size), divisor, size);
        }
        std::vector<uint8_t> dst(count * size);
        accl::dev::divide(type, dst.data(), src.data(), divisor, count);
        expectMatches(type, expected, dst, count, what + " out of place");
        std::vector<uint8_t> inPlace(src.begin(), src.begin() + count * size);
        accl::dev::divide(type, inPlace.data(), inPlace.data(), divisor, count);
        expectMatches(type, expected, inPlace, count, what + " in place");
      }
    }
  }
}

template <class T>
T divideOne(ncclDataType_t type, T v, int divisor) {
  T out;
  accl::dev::divide(type, &out, &v, divisor, 1);
  return out;
}

TEST(Divide, IntegerAverageTruncatesTowardZero) {
  EXPECT_EQ(divideOne<int32_t>(ncclInt32, -7, 2), -3);
  EXPECT_EQ(divideOne<int32_t>(ncclInt32, 7, 2), 3);
  EXPECT_EQ(divideOne<int8_t>(ncclInt8, -128, 3), -42);
  EXPECT_EQ(divideOne<uint8_t>(ncclUint8, 255, 2), 127);
  EXPECT_EQ(divideOne<int32_t>(ncclInt32, std::numeric_limits<int32_t>::min(), 1), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(divideOne<uint32_t>(ncclUint32, 0xffffffffu, 0x7fffffff), 2u);
  EXPECT_EQ(divideOne<int64_t>(ncclInt64, std::numeric_limits<int64_t>::min(), 3),
            std::numeric_limits<int64_t>::min() / 3);
  EXPECT_EQ(divideOne<uint64_t>(ncclUint64, ~0ull, 3), ~0ull / 3);
}

TEST(Divide, FloatAverageRoundsOnceToTheType) {
  EXPECT_EQ(divideOne<float>(ncclFloat32, 1.0f, 3), 1.0f / 3.0f);
  EXPECT_EQ(divideOne<double>(ncclFloat64, 1.0, 3), 1.0 / 3.0);
  EXPECT_EQ(divideOne<uint16_t>(ncclFloat16, accl::dev::floatToHalf(1.0f), 3), accl::dev::floatToHalf(1.0f / 3.0f));
  EXPECT_EQ(divideOne<uint16_t>(ncclBfloat16, accl::dev::floatToBf16(10.0f), 4), accl::dev::floatToBf16(2.5f));
  EXPECT_EQ(divideOne<uint8_t>(ncclFloat8e4m3, 0x7e, 2), accl::dev::floatToFp8e4m3(224.0f));
  // 31.203125 / 1000003 is just below a tie between two float16 subnormals (523.4999975 units
  // of 2^-24); dividing in float would land exactly on the tie and round up to 524.
  EXPECT_EQ(divideOne<uint16_t>(ncclFloat16, 0x4fcd, 1000003), 0x020b);
  EXPECT_TRUE(std::isnan(divideOne<float>(ncclFloat32, std::numeric_limits<float>::quiet_NaN(), 2)));
  EXPECT_TRUE(std::isinf(divideOne<float>(ncclFloat32, std::numeric_limits<float>::infinity(), 2)));
}

TEST(Divide, IntegerDivisorBelowOneLeavesTheDataUnchanged) {
  EXPECT_EQ(divideOne<int32_t>(ncclInt32, 42, 0), 42);
  EXPECT_EQ(divideOne<int64_t>(ncclInt64, std::numeric_limits<int64_t>::min(), -1), std::numeric_limits<int64_t>::min());
}

}  // namespace
