// reference.h: an independent model of NCCL's datatypes for checking results. It never calls
// the library: float16, bfloat16 and the two fp8 formats are decoded and rounded here by our own
// code, integers wrap in the width of their type, and float reductions are computed in double.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "nccl.h"

namespace accl_test {

enum class TypeClass { Signed, Unsigned, Float };

struct TypeInfo {
  ncclDataType_t type;
  const char* name;
  size_t size;
  TypeClass cls;
  int mantissaBits;  // explicit fraction bits (floats only)
  int exponentBits;
  bool hasInfinity;  // e4m3 has none: its top pattern is NaN and the rest are finite
};

const TypeInfo& typeInfo(ncclDataType_t type);
inline constexpr ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,    ncclUint32,
                                               ncclInt64,   ncclUint64,  ncclFloat16,  ncclFloat32,
                                               ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

// Raw element access: the low `size` bytes of a little-endian uint64.
uint64_t loadBits(const void* base, size_t index, size_t size);
void storeBits(void* base, size_t index, size_t size, uint64_t bits);
uint64_t widthMask(size_t size);
int64_t signExtend(uint64_t bits, size_t size);

// Floats: value of a bit pattern (NaN for NaN patterns), and round-to-nearest-even encoding of a
// double that lies within the finite range of the type.
double decodeFloat(ncclDataType_t type, uint64_t bits);
uint64_t encodeFloat(ncclDataType_t type, double value);
bool isFiniteBits(ncclDataType_t type, uint64_t bits);
// 2^-mantissaBits, and the smallest positive subnormal.
double epsilonOf(ncclDataType_t type);
double smallestSubnormalOf(ncclDataType_t type);

// The reductions the matrix checks; PreMulSum multiplies rank r's input by its scalar s_r.
enum class RefOp { Sum, Prod, Max, Min, Avg, PreMulSum };
const char* refOpName(RefOp op);

// One output element of a reduction over all ranks, fed rank by rank in any order.
class RefAccumulator {
 public:
  RefAccumulator(ncclDataType_t type, RefOp op, int nranks);
  void reset();
  // `bits` is rank r's input element; `scalarBits` its PreMulSum scalar (ignored otherwise).
  void add(uint64_t bits, uint64_t scalarBits = 0);
  // For floats whose inputs came from a table, the decoded value saves a second decode.
  void addFloat(double value, double scalar = 1.0);
  // Compares the library's output element; on mismatch fills `why` with got/want/tolerance.
  // exact: floats must match the exact result (the inputs were chosen so no rounding occurs).
  bool matches(uint64_t gotBits, bool exact, std::string* why) const;

 private:
  ncclDataType_t type_;
  const TypeInfo* info_;
  RefOp op_;
  int nranks_;
  int seen_ = 0;
  uint64_t iacc_ = 0;
  double facc_ = 0;
  double magnitude_ = 0;  // sum of |terms| (or |product|): bounds every partial result
};

// Text of an element for messages: integers in decimal, floats as value and hex bits.
std::string formatBits(ncclDataType_t type, uint64_t bits);

// Tables of representable values, so inputs never need rounding.
struct ValuePool {
  std::vector<uint64_t> bits;
  std::vector<double> values;  // decoded (floats); empty for integer pools
};
enum class PoolKind {
  SmallIntegers,  // sums over 8 ranks of these stay exactly representable
  ProductFactors, // {±1, ±2, 0}: products over 8 ranks stay exact
  AnyFinite,      // every finite value (max/min need no arithmetic)
  Fractions,      // non-integers in [-1, 1], for tolerance-based checks
  PositiveFactors // non-integers of magnitude in [0.5, 2], for tolerance-based products
};
const ValuePool& valuePool(ncclDataType_t type, PoolKind kind);
// Largest |v| in the SmallIntegers pool of a type.
int smallIntegerRange(ncclDataType_t type);

inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace accl_test
