#include "sched/yield_gate.h"
#include <sched.h>
#include <atomic>
#include <chrono>
#include "base/log.h"

namespace accl {
namespace {

// Until when (steady clock, us) yields are dear; 0: they are cheap, and no clock is read.
std::atomic<int64_t> dearUntilUsec{0};
// The last yields of the process, newest in bit 0: 1 = it took over kDearYieldUsec.
std::atomic<uint64_t> slowYields{0};
constexpr uint64_t kWindowMask = kDearWindow >= 64 ? ~uint64_t{0} : (uint64_t{1} << kDearWindow) - 1;

int64_t nowUsec() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool yieldsAreCheap() {
  int64_t until = dearUntilUsec.load(std::memory_order_relaxed);
  if (until == 0) return true;
  if (nowUsec() < until) return false;
  if (dearUntilUsec.compare_exchange_strong(until, 0, std::memory_order_relaxed))
    slowYields.store(0, std::memory_order_relaxed);  // the next yields look afresh
  return true;
}

void timedYield() {
  const int64_t before = nowUsec();
  sched_yield();
  const int64_t took = nowUsec() - before;
  const uint64_t slow = took > kDearYieldUsec ? 1 : 0;
  uint64_t seen = slowYields.load(std::memory_order_relaxed);
  if (seen == 0 && !slow) return;  // the common case: no slow yield in the window
  while (!slowYields.compare_exchange_weak(seen, ((seen << 1) | slow) & kWindowMask, std::memory_order_relaxed)) {
  }
  if (!slow || __builtin_popcountll(((seen << 1) | slow) & kWindowMask) < kDearOf) return;
  const bool wasCheap = dearUntilUsec.exchange(before + took + kDearForMs * 1000, std::memory_order_relaxed) == 0;
  if (wasCheap)
    INFO(kSubsysColl, "%d of the last %d yields of the core took over %lld us (the last %lld us: another process's "
         "thread kept it): waits sleep instead of yielding for the next %lld ms", kDearOf, kDearWindow,
         static_cast<long long>(kDearYieldUsec), static_cast<long long>(took), static_cast<long long>(kDearForMs));
}

bool yieldCore(bool oversubscribed, bool pastSpin) {
  if (oversubscribed) {
    sched_yield();
    return true;
  }
  if (!yieldsAreCheap()) return false;
  if (pastSpin) timedYield();
  else sched_yield();
  return true;
}

}  // namespace accl
