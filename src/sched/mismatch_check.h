// mismatch_check.h: ACCL_CHECK_MISMATCH=1. Before a work's collectives move any data, every
// rank all-gathers a fixed-size fingerprint of its calls (operation, count, type, reduction,
// root), so mismatched calls fail on every rank with ncclInvalidUsage naming both sides and
// nothing of them reaches the byte stream: the next, matched call is unaffected. Point-to-point
// sends carry their size in a 16-byte header, so a receive of another size consumes exactly
// what was sent and fails naming both sizes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "coll/algorithms.h"
#include "sched/op.h"

namespace accl {

// One rank's calls, as all ranks exchange them. Same layout on every rank (fixed-width fields).
struct Fingerprint {
  struct Call {
    uint64_t count;
    int32_t root;
    uint8_t kind, type, red, flags;  // flags: 1 avg, 2 premulsum, 4 rank order (ACCL_DETERMINISTIC), 0x80 refused
  };
  uint64_t magic;
  uint32_t nops;
  uint32_t refused;  // RefusedArg of a call refused for its arguments on this rank (a void call), else 0
  uint64_t hash;  // of every call, so groups of more than two collectives compare in full
  uint64_t pad2;
  Call calls[2];  // the first two calls, to name them in the error
};
static_assert(sizeof(Fingerprint) == 64);

// The fingerprint of a work's collective calls (all-to-all included; sends/receives not).
Fingerprint fingerprintOf(const std::vector<const OpDesc*>& collectives);
// "" if every rank's fingerprint in `table` (nranks entries) equals rank 0's; otherwise the
// error text, the same on every rank: "rank 0 called X but rank 3 called Y". *fatal is set
// when a slot is not a fingerprint at all (ranks disagree on ACCL_CHECK_MISMATCH): the byte
// stream can no longer be trusted.
std::string compareFingerprints(const Fingerprint* table, int nranks, bool* fatal);

// What a checked send puts in front of its data.
struct P2pHeader {
  uint64_t magic;
  uint64_t bytes;
};

// A receive that first reads the sender's header, then receives exactly the bytes that were
// sent: into dst when the sizes agree (or fewer were sent), discarded when more were sent.
// A disagreement is written to *mismatch (first one wins); a missing header to *broken.
std::unique_ptr<StepSource> makeCheckedRecv(const OpDesc& op, std::string* mismatch, std::string* broken);
// The header a checked send of `bytes` puts in front of its data.
P2pHeader p2pHeader(uint64_t bytes);

}  // namespace accl
