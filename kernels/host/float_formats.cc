// float_formats.cc: the public (device.h) names of the conversions in float_formats.h.
#include "device.h"
#include "host/float_formats.h"

namespace accl::dev {

float halfToFloat(uint16_t h) { return host::halfBitsToFloat(h); }
uint16_t floatToHalf(float f) { return host::floatToHalfBits(f); }
float bf16ToFloat(uint16_t b) { return host::bf16BitsToFloat(b); }
uint16_t floatToBf16(float f) { return host::floatToBf16Bits(f); }
float fp8e4m3ToFloat(uint8_t v) { return host::fp8e4m3BitsToFloat(v); }
uint8_t floatToFp8e4m3(float f) { return host::floatToFp8e4m3Bits(f); }
float fp8e5m2ToFloat(uint8_t v) { return host::fp8e5m2BitsToFloat(v); }
uint8_t floatToFp8e5m2(float f) { return host::floatToFp8e5m2Bits(f); }

}  // namespace accl::dev
