// stripe.h: how one byte stream is spread over K sockets. The stream is cut into fixed-size
// chunks dealt round-robin (chunk k travels on socket k % K), so each socket carries its
// chunks in order and the receiver knows where every byte belongs without any framing.
#pragma once
#include <cstddef>
#include <cstdint>

namespace accl {

struct Stripe {
  size_t chunk = 1;  // bytes; a power of two that divides the ring capacity
  int nsocks = 1;

  // Stream position of the first byte socket s carries.
  uint64_t firstPos(int s) const { return static_cast<uint64_t>(s) * chunk; }
  // End (exclusive) of the chunk that contains pos.
  uint64_t chunkEnd(uint64_t pos) const { return (pos / chunk + 1) * chunk; }
  // A socket's cursor after it moved n > 0 bytes from pos: at the end of a chunk it jumps
  // over the chunks the other sockets carry.
  uint64_t advance(uint64_t pos, size_t n) const {
    pos += n;
    if (pos % chunk == 0) pos += static_cast<uint64_t>(nsocks - 1) * chunk;
    return pos;
  }
  // How many bytes of its own sub-stream socketOf(pos) carries before pos.
  uint64_t subIndex(uint64_t pos) const {
    return pos / chunk / static_cast<uint64_t>(nsocks) * chunk + pos % chunk;
  }
  // Which socket carries the byte at pos.
  int socketOf(uint64_t pos) const { return static_cast<int>((pos / chunk) % static_cast<uint64_t>(nsocks)); }
};

}  // namespace accl
