// hmac_sha256.h: SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), enough to prove knowledge
// of a shared key in the bootstrap handshakes without sending the key. Not a general crypto
// library: no streaming API beyond what the handshakes need, no constant-time claims except
// for the comparison of MACs.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

namespace accl::boot {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  Digest finish();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t bufLen_ = 0;
  uint64_t totalBytes_ = 0;
};

Digest sha256(const void* data, size_t size);

// HMAC-SHA-256 of the concatenation of `parts` under `key`.
Digest hmacSha256(std::span<const uint8_t> key, std::initializer_list<std::span<const uint8_t>> parts);

// Compares two MACs without stopping at the first difference.
bool equalMacs(const uint8_t* a, const uint8_t* b, size_t size);

template <typename T>
std::span<const uint8_t> bytesOf(const T& value) {
  return {reinterpret_cast<const uint8_t*>(&value), sizeof(T)};
}

}  // namespace accl::boot
