// Fuzzes decodeHandshake: the first message on every rank-to-rank bootstrap connection.
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in{data, size};
  const int nranks = in.take<int16_t>();
  const int self = in.take<int16_t>();
  const uint64_t magic = 0x0123456789abcdefull;
  accl::boot::Handshake hs;
  std::string why = accl::boot::decodeHandshake(in.data, in.size, magic, nranks, self, &hs);
  if (why.empty()) {
    FUZZ_REQUIRE(in.size == sizeof(hs) && hs.magic == magic);
    FUZZ_REQUIRE(hs.rank >= 0 && hs.rank < nranks && hs.rank != self);
    FUZZ_REQUIRE(hs.purpose == accl::boot::Purpose::Ring || hs.purpose == accl::boot::Purpose::P2p);
  }
  return 0;
}
