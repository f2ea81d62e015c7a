// Futex-based doorbells. Several bells (one thread driving several ranks) use futex_waitv.
#include "transports/doorbell.h"
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <cerrno>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

namespace accl {
namespace {

// Shared (not FUTEX_PRIVATE) because bells live in memory shared between processes.
long futexWait(std::atomic<uint32_t>* addr, uint32_t expected, int64_t timeoutUsec) {
  timespec ts{static_cast<time_t>(timeoutUsec / 1000000), static_cast<long>((timeoutUsec % 1000000) * 1000)};
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

struct FutexWaitv {
  uint64_t val;
  uint64_t uaddr;
  uint32_t flags;
  uint32_t reserved;
};
constexpr uint32_t kFutex2Size32 = 0x02;

bool gWaitvMissing = false;

}  // namespace

void ringDoorbell(Doorbell* bell) {
  // The store that published data/space must be ordered before reading `waiters` (the owner
  // does the mirror image), else a wake-up can be lost. A fence keeps the doorbell's cache
  // line shared; ThreadSanitizer does not model fences, so under it an RMW does the same job.
#if defined(__SANITIZE_THREAD__)
  if (bell->waiters.fetch_add(0, std::memory_order_seq_cst) != 0) {
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (bell->waiters.load(std::memory_order_seq_cst) != 0) {
#endif
    bell->seq.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell->seq), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  }
}

void enterDoorbells(Doorbell* const* bells, int n, uint32_t* seqs) {
  for (int i = 0; i < n; i++) {
    bells[i]->waiters.fetch_add(1, std::memory_order_seq_cst);
    seqs[i] = bells[i]->seq.load(std::memory_order_seq_cst);
  }
}

void leaveDoorbells(Doorbell* const* bells, int n) {
  for (int i = 0; i < n; i++) bells[i]->waiters.fetch_sub(1, std::memory_order_seq_cst);
}

void waitDoorbells(Doorbell* const* bells, int n, const uint32_t* seqs, int64_t timeoutUsec) {
  if (n == 1 || gWaitvMissing) {
    futexWait(&bells[0]->seq, seqs[0], n == 1 ? timeoutUsec : (timeoutUsec < 200 ? timeoutUsec : 200));
    return;
  }
  FutexWaitv waits[64];
  if (n > 64) n = 64;
  for (int i = 0; i < n; i++) {
    waits[i] = {seqs[i], reinterpret_cast<uint64_t>(&bells[i]->seq), kFutex2Size32, 0};
  }
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t ns = now.tv_nsec + (timeoutUsec % 1000000) * 1000;
  timespec deadline{now.tv_sec + static_cast<time_t>(timeoutUsec / 1000000) + ns / 1000000000, ns % 1000000000};
  long rc = syscall(SYS_futex_waitv, waits, n, 0, &deadline, CLOCK_MONOTONIC);
  if (rc == -1 && errno == ENOSYS) gWaitvMissing = true;
}

}  // namespace accl
