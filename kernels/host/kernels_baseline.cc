// kernels_baseline.cc: the kernel table compiled for the x86-64 baseline (SSE2), which every
// CPU the library loads on can run.
#include "host/kernel_loops.h"

namespace accl::dev::host {

const KernelTable& baselineKernels() {
  static constexpr KernelTable kTable = makeKernelTable();
  return kTable;
}

}  // namespace accl::dev::host
