// Fuzzes decodeRootReply and decodeAddressTable: what a rank receives from the bootstrap root.
#include <cstring>
#include <string>
#include <vector>
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in{data, size};
  const int nranks = in.take<int8_t>();
  accl::boot::RootReply reply;
  size_t replyBytes = in.size < sizeof(reply) ? in.size : sizeof(reply);
  std::string why = accl::boot::decodeRootReply(in.data, replyBytes, &reply);
  if (why.empty()) {
    FUZZ_REQUIRE(reply.status >= ncclSuccess && reply.status < ncclNumResults);
    FUZZ_REQUIRE(strlen(reply.message) < sizeof(reply.message));
  }
  std::vector<accl::net::SockAddr> table;
  why = accl::boot::decodeAddressTable(in.data + replyBytes, in.size - replyBytes, nranks, &table);
  if (why.empty()) {
    FUZZ_REQUIRE(nranks > 0 && table.size() == static_cast<size_t>(nranks));
    for (const auto& a : table) FUZZ_REQUIRE(accl::boot::validPeerAddress(a));
  }
  return 0;
}
