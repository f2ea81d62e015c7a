// reduce.cc: reduce2 and reduceN, dispatched once per call through the active kernel table.
#include <algorithm>
#include <cstring>

#include "device.h"
#include "host/kernel_table.h"

namespace accl::dev {
namespace {

bool isValid(ncclDataType_t type, RedKind op) {
  return static_cast<unsigned>(type) < static_cast<unsigned>(ncclNumTypes) &&
         static_cast<unsigned>(op) < static_cast<unsigned>(host::kNumRedKinds);
}

// reduceN walks the arrays in chunks small enough that the partial result stays in L1 while
// the sources are folded into it one by one: each source is read once, dst written once.
constexpr size_t kReduceNChunkBytes = 16 * 1024;

}  // namespace

void reduce2(ncclDataType_t type, RedKind op, void* dst, const void* a, const void* b, size_t count) {
  if (!isValid(type, op)) return;
  host::activeKernels().reduce2[type][static_cast<int>(op)](dst, a, b, count);
}

void reduceN(ncclDataType_t type, RedKind op, void* dst, const void* const* srcs, int nsrcs, size_t count) {
  if (!isValid(type, op) || nsrcs <= 0 || count == 0) return;
  const size_t elemSize = typeSize(type);
  if (nsrcs == 1) {
    if (dst != srcs[0]) std::memmove(dst, srcs[0], count * elemSize);
    return;
  }
  const auto kernel = host::activeKernels().reduce2[type][static_cast<int>(op)];
  const size_t chunk = kReduceNChunkBytes / elemSize;
  auto* out = static_cast<char*>(dst);
  for (size_t first = 0; first < count; first += chunk) {
    const size_t n = std::min(chunk, count - first);
    const size_t offset = first * elemSize;
    char* outChunk = out + offset;
    kernel(outChunk, static_cast<const char*>(srcs[0]) + offset, static_cast<const char*>(srcs[1]) + offset, n);
    for (int s = 2; s < nsrcs; ++s) kernel(outChunk, outChunk, static_cast<const char*>(srcs[s]) + offset, n);
  }
}

}  // namespace accl::dev
