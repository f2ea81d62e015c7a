// scale.cc: the multiply (PreMulSum) and divide (Avg) steps, one table dispatch per call.
#include <cstring>

#include "device.h"
#include "host/kernel_table.h"

namespace accl::dev {
namespace {

bool isValid(ncclDataType_t type) { return static_cast<unsigned>(type) < static_cast<unsigned>(ncclNumTypes); }

bool isInteger(ncclDataType_t type) {
  return type == ncclInt8 || type == ncclUint8 || type == ncclInt32 || type == ncclUint32 || type == ncclInt64 ||
         type == ncclUint64;
}

}  // namespace

void scale(ncclDataType_t type, void* dst, const void* src, const void* scalar, size_t count) {
  if (!isValid(type)) return;
  host::activeKernels().scale[type](dst, src, scalar, count);
}

void divide(ncclDataType_t type, void* dst, const void* src, int divisor, size_t count) {
  if (!isValid(type)) return;
  // Avg divides by the rank count, always >= 1. An integer division by anything else would be
  // a trap (0) or an overflow (-1), so the data is passed through unchanged instead.
  if (divisor < 1 && isInteger(type)) {
    if (dst != src) std::memmove(dst, src, count * typeSize(type));
    return;
  }
  host::activeKernels().divide[type](dst, src, divisor, count);
}

}  // namespace accl::dev
