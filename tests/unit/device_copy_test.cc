// copy, typeSize and typeName.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/device.h"

namespace {

TEST(Copy, CopiesEverySizeAndAlignmentExactlyWithoutOverrun) {
  std::vector<uint8_t> src(300);
  std::iota(src.begin(), src.end(), 1);
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t bytes = 0; bytes < 260; bytes += 3) {
      std::vector<uint8_t> dst(280, 0);
      accl::dev::copy(dst.data() + offset, src.data() + 1, bytes);
      for (size_t i = 0; i < dst.size(); ++i) {
        const bool inside = i >= offset && i < offset + bytes;
        ASSERT_EQ(dst[i], inside ? src[1 + i - offset] : 0) << "offset " << offset << " bytes " << bytes << " at " << i;
      }
    }
  }
}

TEST(Copy, LargeCopiesAreExact) {
  const size_t bytes = (9u << 20) + 13;  // above the size where streaming stores kick in
  std::vector<uint8_t> src(bytes);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  for (size_t offset : {0, 3}) {  // aligned and unaligned destination
    std::vector<uint8_t> dst(bytes + offset + 1, 0xee);
    accl::dev::copy(dst.data() + offset, src.data(), bytes);
    EXPECT_EQ(std::memcmp(dst.data() + offset, src.data(), bytes), 0) << "offset " << offset;
    EXPECT_EQ(dst[bytes + offset], 0xee) << "offset " << offset;
    if (offset > 0) {
      EXPECT_EQ(dst[offset - 1], 0xee);
    }
  }
}

TEST(TypeInfo, EveryTypeHasItsNcclSizeAndAName) {
  EXPECT_EQ(accl::dev::typeSize(ncclInt8), 1u);
  EXPECT_EQ(accl::dev::typeSize(ncclUint8), 1u);
  EXPECT_EQ(accl::dev::typeSize(ncclInt32), 4u);
  EXPECT_EQ(accl::dev::typeSize(ncclUint32), 4u);
  EXPECT_EQ(accl::dev::typeSize(ncclInt64), 8u);
  EXPECT_EQ(accl::dev::typeSize(ncclUint64), 8u);
  EXPECT_EQ(accl::dev::typeSize(ncclFloat16), 2u);
  EXPECT_EQ(accl::dev::typeSize(ncclFloat32), 4u);
  EXPECT_EQ(accl::dev::typeSize(ncclFloat64), 8u);
  EXPECT_EQ(accl::dev::typeSize(ncclBfloat16), 2u);
  EXPECT_EQ(accl::dev::typeSize(ncclFloat8e4m3), 1u);
  EXPECT_EQ(accl::dev::typeSize(ncclFloat8e5m2), 1u);
  EXPECT_EQ(accl::dev::typeSize(static_cast<ncclDataType_t>(ncclNumTypes)), 0u);
  EXPECT_STREQ(accl::dev::typeName(ncclBfloat16), "bfloat16");
  EXPECT_STREQ(accl::dev::typeName(static_cast<ncclDataType_t>(-1)), "invalid");
}

}  // namespace
