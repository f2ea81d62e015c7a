// device.h: the only way the library touches data: copy, reduce and scale of typed arrays.
// The host backend (kernels/host/) implements these on CPU memory; GPU backends will
// implement the same table. Float16, bfloat16 and fp8 are reduced by widening to float and
// rounding back to nearest-even after every binary operation (what NCCL's kernels do).
#pragma once
#include <cstddef>
#include <cstdint>
#include "nccl.h"

namespace accl::dev {

// Built-in reduction. Avg and PreMulSum are Sum plus a scale step (see scale()).
enum class RedKind : int { Sum = 0, Prod = 1, Max = 2, Min = 3 };

size_t typeSize(ncclDataType_t t);  // 0 for an invalid type
const char* typeName(ncclDataType_t t);

// dst[i] = a[i] OP b[i] for i < count. dst may alias a or b.
void reduce2(ncclDataType_t type, RedKind op, void* dst, const void* a, const void* b, size_t count);

// dst[i] = src[0][i] OP src[1][i] OP ... OP src[n-1][i], evaluated left to right. dst may alias src[0].
void reduceN(ncclDataType_t type, RedKind op, void* dst, const void* const* srcs, int nsrcs, size_t count);

// dst[i] = src[i] * scalar, where scalar is one element of `type` (bytes at `scalar`).
// Used by PreMulSum (each rank scales its input before the sum).
void scale(ncclDataType_t type, void* dst, const void* src, const void* scalar, size_t count);

// dst[i] = src[i] / divisor: integers divide (truncating, like NCCL's avg on integers);
// floating types divide in float/double and round once. Used for ncclAvg after the sum.
void divide(ncclDataType_t type, void* dst, const void* src, int divisor, size_t count);

// Plain copy; large copies may use non-temporal stores.
void copy(void* dst, const void* src, size_t bytes);
// Copy with non-temporal stores whatever the size: for pieces of a large output that will not
// be read again soon (keeps the caches for the channels and inputs).
void copyStreaming(void* dst, const void* src, size_t bytes);

// Conversions used by tests and by the reference implementation in tests/.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);
float fp8e4m3ToFloat(uint8_t v);
uint8_t floatToFp8e4m3(float f);  // round to nearest even, saturate to +-448, NaN -> 0x7f
float fp8e5m2ToFloat(uint8_t v);
uint8_t floatToFp8e5m2(float f);  // round to nearest even, saturate to +-57344, NaN -> 0x7f

}  // namespace accl::dev
