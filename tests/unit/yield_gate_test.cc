// sched/yield_gate.h: a yield that loses the core to another busy thread makes yields dear for
// a while (waits then sleep instead of yielding), after which the next yield looks again.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <atomic>
#include <chrono>
#include <thread>
#include "sched/yield_gate.h"

namespace accl {
namespace {

// Pins the calling thread to one CPU; false if the host refuses.
bool pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

TEST(YieldGate, AYieldThatLosesTheCoreToABusyThreadMakesYieldsDearForASecond) {
  const int cpu = sched_getcpu();
  ASSERT_GE(cpu, 0);
  ASSERT_TRUE(pinTo(cpu)) << "cannot pin this thread";
  // A busy thread on the same CPU: a yield hands it the core for its time slice (ms).
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    if (!pinTo(cpu)) return;
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  bool dear = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!dear && std::chrono::steady_clock::now() < until) {
    timedYield();
    dear = !yieldsAreCheap();
  }
  stop = true;
  busy.join();
  ASSERT_TRUE(dear) << "no yield beside a busy thread on CPU " << cpu << " took over " << kDearYieldUsec << " us";
  EXPECT_FALSE(yieldsAreCheap());
  std::this_thread::sleep_for(std::chrono::milliseconds(kDearForMs + 100));
  EXPECT_TRUE(yieldsAreCheap()) << "yields still dear " << kDearForMs + 100 << " ms after the last slow one";
}

}  // namespace
}  // namespace accl
