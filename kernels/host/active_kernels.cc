// active_kernels.cc: picks, once, the widest kernel table this CPU can run.
#include "host/kernel_table.h"

namespace accl::dev::host {

bool cpuHasAvx2F16c() {
  static const bool kHas = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return kHas;
}

const KernelTable& activeKernels() {
  static const KernelTable& kActive = cpuHasAvx2F16c() ? avx2Kernels() : baselineKernels();
  return kActive;
}

}  // namespace accl::dev::host
