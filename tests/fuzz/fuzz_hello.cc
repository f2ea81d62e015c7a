// Fuzzes decodeHello: the first message a rank sends the bootstrap root.
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in{data, size};
  const uint64_t magic = in.take<uint8_t>() & 1 ? 0 : 0x1122334455667788ull;
  accl::boot::Hello hello;
  std::string why = accl::boot::decodeHello(in.data, in.size, magic, &hello);
  if (why.empty()) {
    FUZZ_REQUIRE(in.size == sizeof(hello));
    FUZZ_REQUIRE(hello.magic == magic);
    FUZZ_REQUIRE(accl::boot::validPeerAddress(hello.listenAddr));
  }
  return 0;
}
