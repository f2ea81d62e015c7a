#include "sweep.h"

namespace accl::perf {

std::vector<size_t> sweepSizes(size_t minBytes, size_t maxBytes, size_t stepBytes, size_t stepFactor) {
  std::vector<size_t> sizes;
  for (size_t size = minBytes; size <= maxBytes;) {
    sizes.push_back(size);
    const size_t next = stepFactor > 1 ? size * stepFactor : size + stepBytes;
    if (next <= size) break;  // zero step or zero start would never end
    size = next;
  }
  return sizes;
}

std::vector<size_t> warmupSizes(size_t minBytes, size_t maxBytes) {
  if (minBytes == 0) return {0};
  return sweepSizes(minBytes, maxBytes, 0, 2);
}

}  // namespace accl::perf
