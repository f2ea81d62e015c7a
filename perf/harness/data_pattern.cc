#include "data_pattern.h"

#include <algorithm>
#include <cmath>

namespace accl::perf {

DataPattern::DataPattern(ncclDataType_t type, ReduceOp op, bool reducing, int nranks, uint64_t seed)
    : type_(type), op_(op), reducing_(reducing), nranks_(nranks), seed_(seed) {
  const int64_t limit = exactIntegerLimit(type);
  const int contributors = reducing ? nranks : 1;
  if (reducing && op == ReduceOp::kProd) {
    // Values 1 or 2: at most floor(log2(limit)) twos may meet in one product.
    int twos = 0;
    while ((int64_t{2} << twos) <= limit) ++twos;
    modulus_ = 2;
    activeRanks_ = std::min(nranks, twos);
    return;
  }
  const int64_t scale = (reducing && op == ReduceOp::kMulSum) ? 2 : 1;  // odd ranks double
  modulus_ = std::clamp<int64_t>(limit / (contributors * scale) + 1, 2, 64);
  activeRanks_ = static_cast<int>(std::min<int64_t>(nranks, limit / (scale * (modulus_ - 1))));
  if (!reducing) activeRanks_ = nranks;
}

uint64_t DataPattern::mix(int rank, size_t index) const {
  // splitmix64 finaliser: cheap, and neighbouring ranks/indices look unrelated.
  uint64_t z = seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank) * 0xBF58476D1CE4E5B9ull +
               static_cast<uint64_t>(index) * 0x94D049BB133111EBull;
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double DataPattern::input(int rank, size_t index) const {
  const bool product = reducing_ && op_ == ReduceOp::kProd;
  if (rank >= activeRanks_) return product ? 1.0 : 0.0;
  const uint64_t h = mix(rank, index);
  if (product) return 1.0 + static_cast<double>(h & 1);
  return static_cast<double>(h % static_cast<uint64_t>(modulus_));
}

double DataPattern::reduced(size_t index) const {
  double acc = input(0, index) * (op_ == ReduceOp::kMulSum ? mulSumScalar(0) : 1.0);
  for (int r = 1; r < nranks_; ++r) {
    const double v = input(r, index);
    switch (op_) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v; break;
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMulSum: acc += v * mulSumScalar(r); break;
    }
  }
  if (op_ == ReduceOp::kAvg) {
    // Integers divide with truncation; floats round the exact quotient once.
    return isFloatType(type_) ? acc / nranks_ : std::trunc(acc / nranks_);
  }
  return acc;
}

void fillInput(const DataPattern& p, int rank, size_t first, size_t count, void* out) {
  const size_t size = typeSize(p.type());
  auto* bytes = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < count; ++i) encodeValue(p.type(), p.input(rank, first + i), bytes + i * size);
}

}  // namespace accl::perf
