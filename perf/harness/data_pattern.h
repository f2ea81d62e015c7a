// Verifiable data: every rank's input is a seeded pattern of small integers chosen so that any
// reduction order gives the same exact result (partial sums and products stay below the
// type's exact-integer limit), so the expected output can be computed on the host and
// compared bit for bit (avg on floats: within 2 ULP, because a library may pre-scale by 1/n).
#pragma once

#include <cstddef>
#include <cstdint>

#include "datatype.h"

namespace accl::perf {

class DataPattern {
 public:
  // `reducing`: the values of all ranks get combined with `op`; else they are only moved.
  DataPattern(ncclDataType_t type, ReduceOp op, bool reducing, int nranks, uint64_t seed);

  double input(int rank, size_t index) const;
  // The reduction over all ranks of element `index`, as the library should produce it.
  double reduced(size_t index) const;
  // The PreMulSum scalar of a rank (mulsum only).
  static double mulSumScalar(int rank) { return (rank % 2) ? 2.0 : 1.0; }

  ncclDataType_t type() const { return type_; }
  ReduceOp op() const { return op_; }

 private:
  uint64_t mix(int rank, size_t index) const;

  ncclDataType_t type_;
  ReduceOp op_;
  bool reducing_;
  int nranks_;
  uint64_t seed_;
  int64_t modulus_ = 2;   // values are 0..modulus-1 (products: 1 or 2)
  int activeRanks_ = 1;   // ranks past this contribute the neutral value
};

// Writes `count` pattern values of `rank` starting at pattern index `first`.
void fillInput(const DataPattern& p, int rank, size_t first, size_t count, void* out);

}  // namespace accl::perf
