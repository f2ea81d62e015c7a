// kernel_table.h: one function pointer per (type, op), so the public entry points dispatch
// once per call and the loops themselves contain no switch. Two tables exist: one for the
// x86-64 baseline and one built for AVX2+F16C, chosen once at startup from CPUID.
#pragma once
#include <cstddef>

#include "nccl.h"

namespace accl::dev::host {

inline constexpr int kNumRedKinds = 4;  // Sum, Prod, Max, Min (RedKind values)

struct KernelTable {
  using Reduce2 = void (*)(void* dst, const void* a, const void* b, size_t count);
  using Scale = void (*)(void* dst, const void* src, const void* scalar, size_t count);
  using Divide = void (*)(void* dst, const void* src, int divisor, size_t count);

  Reduce2 reduce2[ncclNumTypes][kNumRedKinds];
  Scale scale[ncclNumTypes];
  Divide divide[ncclNumTypes];
};

const KernelTable& baselineKernels();
const KernelTable& avx2Kernels();       // only call when cpuHasAvx2F16c()
bool cpuHasAvx2F16c();
const KernelTable& activeKernels();     // the best table this CPU can run

}  // namespace accl::dev::host
