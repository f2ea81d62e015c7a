// call_stamp.h: what a rank's call looks like on the wire (ACCL_CHECK_MISMATCH=1, the
// default). Every collective and send puts a stamp of its call in front of the first bytes it
// sends on each connection (sched/call_stamp.h) and in its shared-memory board slot
// (board.h), so the receiver checks that both sides are in the same call before it uses the
// data: mismatched calls fail instead of being silently wrong or hanging, at no extra message.
#pragma once
#include <cstdint>
#include <cstring>

namespace accl {

constexpr uint32_t kCallStampMagic = 0x41434353u;  // "ACCS"

struct CallStamp {
  uint32_t magic = 0;  // kCallStampMagic; anything else: the peer sent no stamp
  uint32_t seq = 0;    // collectives: the communicator's call number; sends: 0
  uint64_t count = 0;  // elements; sends: bytes
  int32_t root = -1;   // rooted collectives: the root; sends: the sender's rank
  uint8_t kind = 0, type = 0, red = 0, flags = 0;  // flags: 1 avg, 2 premulsum, 4 rank order, kStampRefused
};
// The stamp of a call refused for its arguments (a void call, api/coll_api.cc): never sent,
// it keeps the call's number in a realignment's notes.
constexpr uint8_t kStampRefused = 0x80;
static_assert(sizeof(CallStamp) == 24);

inline bool sameStamp(const CallStamp& a, const CallStamp& b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

// A stamp as it travels in a byte stream: padded to the stream's 16-byte step alignment.
constexpr size_t kStampWireBytes = 32;

}  // namespace accl
