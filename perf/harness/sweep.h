// The message sizes one run visits: -b, then *f (or +i), while <= -e.
#pragma once

#include <cstddef>
#include <vector>

namespace accl::perf {

std::vector<size_t> sweepSizes(size_t minBytes, size_t maxBytes, size_t stepBytes, size_t stepFactor);
// Warm-up always doubles from -b to -e (a zero -b warms up with one empty op).
std::vector<size_t> warmupSizes(size_t minBytes, size_t maxBytes);

}  // namespace accl::perf
