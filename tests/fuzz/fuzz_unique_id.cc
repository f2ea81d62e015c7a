// Fuzzes decodeUniqueIdBytes: an ncclUniqueId as handed to ncclCommInitRank (it travels between
// processes through the user's own channel, so it is untrusted too).
#include "bootstrap/bootstrap.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  accl::UniqueIdContents contents;
  accl::net::SockAddr root;
  std::string why = accl::boot::decodeUniqueIdBytes(data, size, &contents, &root);
  if (why.empty()) {
    FUZZ_REQUIRE(size >= sizeof(contents));
    FUZZ_REQUIRE(contents.magic != 0);
    FUZZ_REQUIRE(accl::boot::validPeerAddress(root));
  }
  return 0;
}
