// device_test_inputs.h: the types, lengths and random inputs the device_* tests run over.
#pragma once
#include <bit>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "device_reference.h"
#include "kernels/device.h"

namespace accl::test {

constexpr ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,    ncclUint32,
                                        ncclInt64,   ncclUint64,  ncclFloat16,  ncclFloat32,
                                        ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
constexpr size_t kOddCounts[] = {0, 1, 7, 1000003};

// `count` elements of `type`. Integers: all random bits, so sums and products wrap constantly.
// Floats: mostly moderate(rng), a value of the magnitude the test wants (so its arithmetic
// rounds rather than overflows); one in eight random bit patterns (NaN, inf, subnormals,
// extremes).
inline std::vector<uint8_t> randomElements(ncclDataType_t type, size_t count, uint32_t seed,
                                           const std::function<double(std::mt19937_64&)>& moderate) {
  const size_t size = accl::dev::typeSize(type);
  std::vector<uint8_t> out(count * size);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < count; ++i) {
    uint64_t bits = rng();
    if (!isIntegerType(type) && rng() % 8 != 0) {
      const double v = moderate(rng);
      if (const auto* f = narrowFormatOf(type)) {
        bits = f->encode(v, 0);
      } else if (type == ncclFloat32) {
        bits = std::bit_cast<uint32_t>(static_cast<float>(v));
      } else {
        bits = std::bit_cast<uint64_t>(v);
      }
    }
    storeBits(&out[i * size], size, bits);
  }
  return out;
}

}  // namespace accl::test
