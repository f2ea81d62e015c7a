#include "datatype.h"

#include <array>
#include <cmath>
#include <cstring>

namespace accl::perf {
namespace {

struct TypeInfo {
  ncclDataType_t type;
  std::string_view name;
  size_t size;
  bool isFloat;
  int64_t exactLimit;
};

// Limits keep every partial sum exact in any reduction order (see data_pattern.h); 64-bit
// integers are capped so a double still holds every value exactly.
constexpr std::array<TypeInfo, ncclNumTypes> kTypes = {{
    {ncclInt8, "int8", 1, false, 127},
    {ncclUint8, "uint8", 1, false, 255},
    {ncclInt32, "int32", 4, false, 1 << 24},
    {ncclUint32, "uint32", 4, false, 1 << 24},
    {ncclInt64, "int64", 8, false, 1 << 24},
    {ncclUint64, "uint64", 8, false, 1 << 24},
    {ncclFloat16, "half", 2, true, 2048},
    {ncclFloat32, "float", 4, true, 1 << 24},
    {ncclFloat64, "double", 8, true, 1 << 24},
    {ncclBfloat16, "bfloat16", 2, true, 256},
    {ncclFloat8e4m3, "f8e4m3", 1, true, 16},
    {ncclFloat8e5m2, "f8e5m2", 1, true, 8},
}};

const TypeInfo& info(ncclDataType_t type) {
  for (const TypeInfo& t : kTypes)
    if (t.type == type) return t;
  return kTypes[7];
}

constexpr std::array<std::string_view, 6> kOpNames = {"sum", "prod", "max", "min", "avg", "mulsum"};

// A narrow binary float: sign, `ebits` exponent bits, `mbits` mantissa bits.
struct SmallFloat {
  int ebits;
  int mbits;
  bool finiteOnly;  // e4m3 "fn": no infinity, all-ones exponent still holds normals
};

uint32_t encodeSmallFloat(double x, SmallFloat f) {
  const uint32_t sign = std::signbit(x) ? 1u << (f.ebits + f.mbits) : 0u;
  const uint32_t expMask = (1u << f.ebits) - 1;
  const uint32_t nanBits = (expMask << f.mbits) | ((1u << f.mbits) - 1);
  if (std::isnan(x)) return nanBits;
  double a = std::fabs(x);
  if (a == 0) return sign;
  const int bias = (1 << (f.ebits - 1)) - 1;
  int exp2 = 0;
  std::frexp(a, &exp2);
  int e = exp2 - 1;  // a = 1.m * 2^e
  if (e < 1 - bias) {
    // Subnormal: a multiple of 2^(1-bias-mbits); a carry into bit mbits is the smallest normal.
    return sign | static_cast<uint32_t>(std::nearbyint(std::ldexp(a, f.mbits + bias - 1)));
  }
  double frac = std::nearbyint((std::ldexp(a, -e) - 1.0) * (1 << f.mbits));
  if (frac >= (1 << f.mbits)) {
    frac = 0;
    ++e;
  }
  const uint32_t field = static_cast<uint32_t>(e + bias);
  const uint32_t bits = (field << f.mbits) | static_cast<uint32_t>(frac);
  if (f.finiteOnly) return (field > expMask || bits >= nanBits) ? sign | nanBits : sign | bits;
  if (field >= expMask) return sign | (expMask << f.mbits);  // overflow: infinity
  return sign | bits;
}

uint64_t loadBits(const void* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);  // little-endian host
  return v;
}

// Maps sign-magnitude bits onto a line where neighbouring floats differ by one.
int64_t orderedBits(uint64_t bits, size_t size) {
  const uint64_t signBit = uint64_t{1} << (size * 8 - 1);
  const int64_t magnitude = static_cast<int64_t>(bits & (signBit - 1));
  return (bits & signBit) ? -magnitude : magnitude;
}

}  // namespace

std::string_view typeName(ncclDataType_t type) { return info(type).name; }
size_t typeSize(ncclDataType_t type) { return info(type).size; }
bool isFloatType(ncclDataType_t type) { return info(type).isFloat; }
int64_t exactIntegerLimit(ncclDataType_t type) { return info(type).exactLimit; }

std::optional<ncclDataType_t> parseTypeName(std::string_view name) {
  for (const TypeInfo& t : kTypes)
    if (t.name == name) return t.type;
  // Aliases NCCL users type.
  if (name == "char") return ncclInt8;
  if (name == "int") return ncclInt32;
  if (name == "float16" || name == "fp16") return ncclFloat16;
  if (name == "float32" || name == "fp32") return ncclFloat32;
  if (name == "float64" || name == "fp64") return ncclFloat64;
  if (name == "bf16") return ncclBfloat16;
  return std::nullopt;
}

const std::vector<ncclDataType_t>& allTypes() {
  static const std::vector<ncclDataType_t> types = [] {
    std::vector<ncclDataType_t> v;
    for (const TypeInfo& t : kTypes) v.push_back(t.type);
    return v;
  }();
  return types;
}

std::string_view opName(ReduceOp op) { return kOpNames[static_cast<size_t>(op)]; }

std::optional<ReduceOp> parseOpName(std::string_view name) {
  for (size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == name) return static_cast<ReduceOp>(i);
  if (name == "premulsum") return ReduceOp::kMulSum;
  return std::nullopt;
}

const std::vector<ReduceOp>& allOps() {
  static const std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax,
                                            ReduceOp::kMin, ReduceOp::kAvg,  ReduceOp::kMulSum};
  return ops;
}

ncclRedOp_t builtinOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kProd: return ncclProd;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMulSum: break;
  }
  return ncclSum;
}

void encodeValue(ncclDataType_t type, double value, void* out) {
  switch (type) {
    case ncclFloat32: {
      const float f = static_cast<float>(value);
      std::memcpy(out, &f, sizeof f);
      return;
    }
    case ncclFloat64: std::memcpy(out, &value, sizeof value); return;
    case ncclFloat16: {
      const uint16_t h = static_cast<uint16_t>(encodeSmallFloat(value, {5, 10, false}));
      std::memcpy(out, &h, sizeof h);
      return;
    }
    case ncclBfloat16: {
      const uint16_t b = static_cast<uint16_t>(encodeSmallFloat(value, {8, 7, false}));
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case ncclFloat8e4m3: *static_cast<uint8_t*>(out) = static_cast<uint8_t>(encodeSmallFloat(value, {4, 3, true})); return;
    case ncclFloat8e5m2: *static_cast<uint8_t*>(out) = static_cast<uint8_t>(encodeSmallFloat(value, {5, 2, false})); return;
    default: {
      // Two's complement wrap is what the integer kernels do too.
      const uint64_t bits = static_cast<uint64_t>(static_cast<int64_t>(value));
      std::memcpy(out, &bits, typeSize(type));
      return;
    }
  }
}

uint64_t ulpDistance(ncclDataType_t type, const void* a, const void* b) {
  const size_t size = typeSize(type);
  const uint64_t bitsA = loadBits(a, size), bitsB = loadBits(b, size);
  if (bitsA == bitsB) return 0;
  if (!isFloatType(type)) return UINT64_MAX;
  const int64_t d = orderedBits(bitsA, size) - orderedBits(bitsB, size);
  return static_cast<uint64_t>(d < 0 ? -d : d);
}

}  // namespace accl::perf
