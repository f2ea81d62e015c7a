// Fuzzes decodeP2pHeader: the header before each bootstrap point-to-point message.
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  accl::boot::P2pHeader h;
  std::string why = accl::boot::decodeP2pHeader(data, size, &h);
  if (why.empty()) {
    FUZZ_REQUIRE(size == sizeof(h));
    FUZZ_REQUIRE(h.size <= accl::boot::kMaxP2pMessageBytes);
  }
  return 0;
}
