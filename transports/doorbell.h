// doorbell.h: how a waiting rank sleeps without missing a wake-up. Each rank owns one
// doorbell in shared memory; peers ring it after publishing data or freeing space. Ringing
// costs a syscall only while the owner sleeps (Dekker-style handshake on `waiters`).
#pragma once
#include <atomic>
#include <cstdint>

namespace accl {

struct alignas(64) Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> waiters{0};
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// Called by a peer after a release/commit store. Wakes the owner if it sleeps.
void ringDoorbell(Doorbell* bell);

// Owner side: announce intent to sleep, snapshot seq. The caller then re-checks its
// condition and either sleeps with waitDoorbells() or cancels with leaveDoorbells().
void enterDoorbells(Doorbell* const* bells, int n, uint32_t* seqs);
void leaveDoorbells(Doorbell* const* bells, int n);
// Sleeps until any bell's seq differs from seqs[] or timeoutUsec elapses.
void waitDoorbells(Doorbell* const* bells, int n, const uint32_t* seqs, int64_t timeoutUsec);

}  // namespace accl
