// reference.cc: see reference.h. Conversions are written from the format definitions
// (IEEE 754 binary16/32/64, bfloat16, OCP FP8 E4M3 and E5M2), not taken from any library.
#include "common/reference.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace accl_test {
namespace {

const TypeInfo kTypes[] = {
    {ncclInt8, "int8", 1, TypeClass::Signed, 0, 0, false},
    {ncclUint8, "uint8", 1, TypeClass::Unsigned, 0, 0, false},
    {ncclInt32, "int32", 4, TypeClass::Signed, 0, 0, false},
    {ncclUint32, "uint32", 4, TypeClass::Unsigned, 0, 0, false},
    {ncclInt64, "int64", 8, TypeClass::Signed, 0, 0, false},
    {ncclUint64, "uint64", 8, TypeClass::Unsigned, 0, 0, false},
    {ncclFloat16, "float16", 2, TypeClass::Float, 10, 5, true},
    {ncclFloat32, "float32", 4, TypeClass::Float, 23, 8, true},
    {ncclFloat64, "float64", 8, TypeClass::Float, 52, 11, true},
    {ncclBfloat16, "bfloat16", 2, TypeClass::Float, 7, 8, true},
    {ncclFloat8e4m3, "float8e4m3", 1, TypeClass::Float, 3, 4, false},
    {ncclFloat8e5m2, "float8e5m2", 1, TypeClass::Float, 2, 5, true},
};

// A binary float with `e` exponent bits and `m` fraction bits, value of a pattern.
double decodeSmall(uint64_t bits, int e, int m, bool hasInf) {
  const uint64_t sign = (bits >> (e + m)) & 1;
  const uint64_t expAll = (uint64_t{1} << e) - 1, mantAll = (uint64_t{1} << m) - 1;
  const uint64_t exp = (bits >> m) & expAll, mant = bits & mantAll;
  const int bias = (1 << (e - 1)) - 1;
  double v;
  if (exp == expAll && (hasInf || mant == mantAll)) {
    v = (hasInf && mant == 0) ? INFINITY : NAN;
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - bias - m);
  } else {
    v = std::ldexp(static_cast<double>(mant | (mantAll + 1)), static_cast<int>(exp) - bias - m);
  }
  return sign ? -v : v;
}

uint64_t encodeSmall(double v, int e, int m, bool hasInf) {
  const uint64_t sign = std::signbit(v) ? 1 : 0;
  const double a = std::fabs(v);
  const int bias = (1 << (e - 1)) - 1;
  const uint64_t expAll = (uint64_t{1} << e) - 1;
  uint64_t field = 0;
  if (a != 0) {
    int ex;
    std::frexp(a, &ex);
    int exp = ex - 1;  // a = 1.f * 2^exp
    const int minExp = 1 - bias;
    if (exp < minExp) exp = minExp;  // subnormal: quantum 2^(minExp - m)
    double q = std::nearbyint(std::ldexp(a, m - exp));
    if (q >= std::ldexp(1.0, m + 1)) {  // rounding carried into the next binade
      exp++;
      q = std::ldexp(q, -1);
    }
    const uint64_t mant = static_cast<uint64_t>(q);
    uint64_t expField = (mant >> m) ? static_cast<uint64_t>(exp + bias) : 0;
    uint64_t maxField = hasInf ? expAll - 1 : expAll;
    if (expField > maxField) {
      std::fprintf(stderr, "encodeFloat: %g is out of range\n", v);
      std::abort();
    }
    field = (expField << m) | (mant & ((uint64_t{1} << m) - 1));
  }
  return (sign << (e + m)) | field;
}

const std::vector<double>& decodeTable(ncclDataType_t type) {
  static std::once_flag once;
  static std::vector<double> tables[ncclNumTypes];
  std::call_once(once, [] {
    for (ncclDataType_t t : {ncclFloat16, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2}) {
      const TypeInfo& ti = typeInfo(t);
      size_t n = size_t{1} << (8 * ti.size);
      tables[t].resize(n);
      for (size_t b = 0; b < n; b++) tables[t][b] = decodeSmall(b, ti.exponentBits, ti.mantissaBits, ti.hasInfinity);
    }
  });
  return tables[type];
}

}  // namespace

const TypeInfo& typeInfo(ncclDataType_t type) { return kTypes[type]; }

uint64_t widthMask(size_t size) { return size >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1; }

int64_t signExtend(uint64_t bits, size_t size) {
  if (size >= 8) return static_cast<int64_t>(bits);
  const int shift = 64 - 8 * static_cast<int>(size);
  return static_cast<int64_t>(bits << shift) >> shift;
}

uint64_t loadBits(const void* base, size_t index, size_t size) {
  const unsigned char* p = static_cast<const unsigned char*>(base) + index * size;
  switch (size) {
    case 1: return *p;
    case 2: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    default: { uint64_t v; std::memcpy(&v, p, 8); return v; }
  }
}

void storeBits(void* base, size_t index, size_t size, uint64_t bits) {
  unsigned char* p = static_cast<unsigned char*>(base) + index * size;
  switch (size) {
    case 1: *p = static_cast<unsigned char>(bits); break;
    case 2: { uint16_t v = static_cast<uint16_t>(bits); std::memcpy(p, &v, 2); break; }
    case 4: { uint32_t v = static_cast<uint32_t>(bits); std::memcpy(p, &v, 4); break; }
    default: std::memcpy(p, &bits, 8); break;
  }
}

double decodeFloat(ncclDataType_t type, uint64_t bits) {
  if (type == ncclFloat32) {
    float f;
    uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, 4);
    return f;
  }
  if (type == ncclFloat64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  return decodeTable(type)[bits & widthMask(typeInfo(type).size)];
}

uint64_t encodeFloat(ncclDataType_t type, double value) {
  if (type == ncclFloat32) {
    float f = static_cast<float>(value);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  }
  if (type == ncclFloat64) {
    uint64_t b;
    std::memcpy(&b, &value, 8);
    return b;
  }
  const TypeInfo& ti = typeInfo(type);
  return encodeSmall(value, ti.exponentBits, ti.mantissaBits, ti.hasInfinity);
}

bool isFiniteBits(ncclDataType_t type, uint64_t bits) { return std::isfinite(decodeFloat(type, bits)); }

double epsilonOf(ncclDataType_t type) { return std::ldexp(1.0, -typeInfo(type).mantissaBits); }

double smallestSubnormalOf(ncclDataType_t type) {
  const TypeInfo& ti = typeInfo(type);
  const int bias = (1 << (ti.exponentBits - 1)) - 1;
  return std::ldexp(1.0, 1 - bias - ti.mantissaBits);
}

const char* refOpName(RefOp op) {
  switch (op) {
    case RefOp::Sum: return "sum";
    case RefOp::Prod: return "prod";
    case RefOp::Max: return "max";
    case RefOp::Min: return "min";
    case RefOp::Avg: return "avg";
    case RefOp::PreMulSum: return "premulsum";
  }
  return "?";
}

RefAccumulator::RefAccumulator(ncclDataType_t type, RefOp op, int nranks)
    : type_(type), info_(&typeInfo(type)), op_(op), nranks_(nranks) {}

void RefAccumulator::reset() {
  seen_ = 0;
  iacc_ = 0;
  facc_ = 0;
  magnitude_ = 0;
}

void RefAccumulator::add(uint64_t bits, uint64_t scalarBits) {
  if (info_->cls == TypeClass::Float) {
    addFloat(decodeFloat(type_, bits), op_ == RefOp::PreMulSum ? decodeFloat(type_, scalarBits) : 1.0);
    return;
  }
  const bool isSigned = info_->cls == TypeClass::Signed;
  const size_t size = info_->size;
  switch (op_) {
    case RefOp::Sum:
    case RefOp::Avg: iacc_ += bits; break;
    case RefOp::Prod: iacc_ = seen_ == 0 ? bits : iacc_ * bits; break;
    case RefOp::PreMulSum: iacc_ += bits * scalarBits; break;
    case RefOp::Max:
    case RefOp::Min: {
      bool take;
      if (seen_ == 0) {
        take = true;
      } else if (isSigned) {
        int64_t a = signExtend(bits, size), b = signExtend(iacc_, size);
        take = op_ == RefOp::Max ? a > b : a < b;
      } else {
        uint64_t a = bits & widthMask(size), b = iacc_ & widthMask(size);
        take = op_ == RefOp::Max ? a > b : a < b;
      }
      if (take) iacc_ = bits;
      break;
    }
  }
  seen_++;
}

void RefAccumulator::addFloat(double v, double scalar) {
  switch (op_) {
    case RefOp::Sum:
    case RefOp::Avg:
      facc_ += v;
      magnitude_ += std::fabs(v);
      break;
    case RefOp::PreMulSum:
      facc_ += v * scalar;
      magnitude_ += std::fabs(v * scalar);
      break;
    case RefOp::Prod:
      facc_ = seen_ == 0 ? v : facc_ * v;
      magnitude_ = std::fabs(facc_);
      break;
    case RefOp::Max: facc_ = seen_ == 0 || v > facc_ ? v : facc_; break;
    case RefOp::Min: facc_ = seen_ == 0 || v < facc_ ? v : facc_; break;
  }
  seen_++;
}

bool RefAccumulator::matches(uint64_t gotBits, bool exact, std::string* why) const {
  const size_t size = info_->size;
  const uint64_t mask = widthMask(size);
  if (info_->cls != TypeClass::Float) {
    uint64_t want = iacc_ & mask;
    if (op_ == RefOp::Avg) {
      if (info_->cls == TypeClass::Signed) {
        want = static_cast<uint64_t>(signExtend(want, size) / nranks_) & mask;
      } else {
        want = want / static_cast<uint64_t>(nranks_);
      }
    }
    if ((gotBits & mask) == want) return true;
    if (why) *why = "got " + formatBits(type_, gotBits) + " want " + formatBits(type_, want);
    return false;
  }
  const double n = nranks_;
  const double eps = epsilonOf(type_), sub = smallestSubnormalOf(type_);
  double want = op_ == RefOp::Avg ? facc_ / n : facc_;
  double tol = 0;
  if (op_ == RefOp::Avg) {
    // The sum is exact (or within the sum's bound), then one division rounds.
    tol = eps * std::fabs(want) + sub;
    if (!exact) tol += (eps * n * magnitude_ + n * sub) / n;
  } else if (!exact && op_ != RefOp::Max && op_ != RefOp::Min) {
    // Every partial result is bounded by `magnitude_`; each of at most n roundings
    // (premultiply, additions, or multiplications) errs by half an ulp of it.
    tol = eps * n * magnitude_ + n * sub;
  }
  const double got = decodeFloat(type_, gotBits);
  if (!std::isnan(got) && std::fabs(got - want) <= tol) return true;
  if (why) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "got %s want %.9g (tolerance %.3g)", formatBits(type_, gotBits).c_str(), want,
                  tol);
    *why = buf;
  }
  return false;
}

std::string formatBits(ncclDataType_t type, uint64_t bits) {
  const TypeInfo& ti = typeInfo(type);
  char buf[96];
  bits &= widthMask(ti.size);
  if (ti.cls == TypeClass::Signed) {
    std::snprintf(buf, sizeof(buf), "%" PRId64, signExtend(bits, ti.size));
  } else if (ti.cls == TypeClass::Unsigned) {
    std::snprintf(buf, sizeof(buf), "%" PRIu64, bits);
  } else {
    std::snprintf(buf, sizeof(buf), "%.9g [0x%" PRIx64 "]", decodeFloat(type, bits), bits);
  }
  return buf;
}

int smallIntegerRange(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return 100;       // 8 ranks: |sum| <= 800 < 2^11
    case ncclBfloat16: return 16;       // 8 ranks: |sum| <= 128 < 2^8
    case ncclFloat8e4m3: return 2;      // 8 ranks: |sum| <= 16 = 2^4
    case ncclFloat8e5m2: return 1;      // 8 ranks: |sum| <= 8 = 2^3
    default: return 1000;               // float32/64
  }
}

const ValuePool& valuePool(ncclDataType_t type, PoolKind kind) {
  static std::once_flag once;
  static ValuePool pools[ncclNumTypes][5];
  std::call_once(once, [] {
    for (ncclDataType_t t : kAllTypes) {
      if (typeInfo(t).cls != TypeClass::Float) continue;
      auto add = [t](ValuePool& p, double v) {
        p.bits.push_back(encodeFloat(t, v));
        p.values.push_back(decodeFloat(t, p.bits.back()));
        if (p.values.back() != v && t != ncclFloat32 && t != ncclFloat64) {
          std::fprintf(stderr, "valuePool: %g is not exact in %s\n", v, typeInfo(t).name);
          std::abort();
        }
      };
      const size_t size = typeInfo(t).size;
      ValuePool& small = pools[t][static_cast<int>(PoolKind::SmallIntegers)];
      for (int v = -smallIntegerRange(t); v <= smallIntegerRange(t); v++) add(small, v);
      ValuePool& factors = pools[t][static_cast<int>(PoolKind::ProductFactors)];
      for (int i = 0; i < 63; i++) add(factors, (i % 4 < 2 ? 1.0 : 2.0) * (i % 2 ? -1.0 : 1.0));
      add(factors, 0.0);
      ValuePool& any = pools[t][static_cast<int>(PoolKind::AnyFinite)];
      ValuePool& frac = pools[t][static_cast<int>(PoolKind::Fractions)];
      ValuePool& pos = pools[t][static_cast<int>(PoolKind::PositiveFactors)];
      if (size <= 2) {
        for (uint64_t b = 0; b < (uint64_t{1} << (8 * size)); b++) {
          double v = decodeFloat(t, b);
          if (!std::isfinite(v)) continue;
          any.bits.push_back(b);
          any.values.push_back(v);
          if (std::fabs(v) <= 1 && v != std::trunc(v)) {
            frac.bits.push_back(b);
            frac.values.push_back(v);
          }
          if (std::fabs(v) >= 0.5 && std::fabs(v) <= 2) {
            pos.bits.push_back(b);
            pos.values.push_back(v);
          }
        }
      } else {
        for (uint64_t i = 0; i < 4096; i++) {
          uint64_t h = mix64(i * 7919 + static_cast<uint64_t>(t));
          uint64_t b = h & widthMask(size);
          if (!isFiniteBits(t, b)) b ^= (size == 4 ? uint64_t{1} << 30 : uint64_t{1} << 62);  // clear top exponent bit
          any.bits.push_back(b);
          any.values.push_back(decodeFloat(t, b));
          double u = static_cast<double>(h >> 11) / 9007199254740992.0;  // [0, 1)
          add(frac, 2 * u - 1);
          add(pos, (h & 1 ? -1 : 1) * (0.5 + 1.5 * u));
        }
      }
    }
  });
  return pools[type][static_cast<int>(kind)];
}

}  // namespace accl_test
