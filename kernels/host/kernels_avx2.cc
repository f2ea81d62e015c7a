// kernels_avx2.cc: the same kernel table compiled for AVX2+F16C: twice the vector width, and
// float16 converted by the F16C instructions instead of integer bit manipulation.
// Headers come first so that only the loops below are compiled for the wider target; see
// kernel_loops.h for why they have internal linkage.
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "host/element_types.h"
#include "host/kernel_table.h"

// GCC takes a target for the rest of the file; clang ignores that pragma, and takes an attribute
// on every function declared until the pop instead (issue 40: the build must work with clang 19).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#endif
#define ACCL_KERNELS_F16C 1
#include "host/kernel_loops.h"

namespace accl::dev::host {

const KernelTable& avx2Kernels() {
  static constexpr KernelTable kTable = makeKernelTable();
  return kTable;
}

}  // namespace accl::dev::host
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
