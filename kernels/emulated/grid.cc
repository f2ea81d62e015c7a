#include "emulated/grid.h"
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>
#include "emulated/fiber.h"
#include "portable.h"

namespace accl::kern {

thread_local ThreadCoords tlsCoords;

namespace {

constexpr size_t kStackBytes = 64 << 10;

// Fiber stacks, reused across blocks and launches.
class StackPool {
 public:
  char* take() {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!free_.empty()) {
        char* s = free_.back();
        free_.pop_back();
        return s;
      }
    }
    void* p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "emulated kernels: cannot map a fiber stack\n");
      std::abort();
    }
    return static_cast<char*>(p);
  }
  void give(char* s) {
    std::lock_guard<std::mutex> g(mu_);
    free_.push_back(s);
  }

 private:
  std::mutex mu_;
  std::vector<char*> free_;
};

StackPool& stacks() {
  static auto* p = new StackPool;  // never destroyed: detached block threads may outlive statics
  return *p;
}

// Host threads for blocks, kept between launches. Every job gets a thread at once (a new one
// when none is idle): blocks of a launch must all run together, as resident blocks do.
class BlockThreads {
 public:
  void submit(std::function<void()> job) {
    std::lock_guard<std::mutex> g(mu_);
    jobs_.push_back(std::move(job));
    if (idle_ < jobs_.size()) {
      std::thread([this] { serve(); }).detach();
    } else {
      cv_.notify_one();
    }
  }

 private:
  void serve() {
    std::unique_lock<std::mutex> g(mu_);
    for (;;) {
      while (jobs_.empty()) {
        idle_++;
        cv_.wait(g);
        idle_--;
      }
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      g.unlock();
      job();
      g.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  size_t idle_ = 0;
};

BlockThreads& blockThreads() {
  static auto* p = new BlockThreads;  // never destroyed: its threads are detached
  return *p;
}

struct LaunchState {
  std::atomic<bool> faulted{false};
  std::mutex mu;
  std::optional<Fault> first;
  void fail(Fault f) {
    std::lock_guard<std::mutex> g(mu);
    if (!first) first = std::move(f);
    faulted.store(true);
  }
};

enum class FiberState { Running, AtBarrier, Paused, Done };

class BlockRun;

// A fiber runs threads of its block one after another, each to its end, until one of them has
// to wait (barrier or spin); the scheduler then starts another fiber for the threads not yet
// started. Threads that never wait (elementwise kernels) thus cost a function call each, not a
// fiber each.
struct Fiber {
  FiberContext ctx;
  char* stack = nullptr;
  unsigned thread = 0;  // the thread it runs now
  FiberState state = FiberState::Running;
  BlockRun* block = nullptr;
};

thread_local BlockRun* tlsBlock = nullptr;

// One block on one host thread.
class BlockRun {
 public:
  BlockRun(LaunchState& launch, const ThreadBody& body, unsigned blockDim)
      : launch_(launch), body_(body), blockDim_(blockDim) {}

  void run() {
    tlsBlock = this;
    std::vector<Fiber*> alive;
    while (nextThread_ < blockDim_) {
      Fiber* f = fiber();
      if (resume(f)) alive.push_back(f);
    }
    unsigned idleRounds = 0;  // rounds in a row in which every thread only spun
    while (!alive.empty()) {
      bool allAtBarrier = true;
      for (Fiber* f : alive) allAtBarrier = allAtBarrier && f->state == FiberState::AtBarrier;
      if (allAtBarrier)
        for (Fiber* f : alive) f->state = FiberState::Running;
      bool ranOne = false;
      std::vector<Fiber*> next;
      for (Fiber* f : alive) {
        if (f->state == FiberState::AtBarrier) {
          next.push_back(f);
          continue;
        }
        ranOne = ranOne || f->state != FiberState::Paused;
        if (resume(f)) next.push_back(f);
      }
      alive.swap(next);
      if (ranOne || alive.empty()) {
        idleRounds = 0;
      } else {
        idleRounds++;
        idleBackoff(idleRounds);
      }
    }
    for (char* s : spare_) stacks().give(s);
    tlsBlock = nullptr;
  }

  // Every thread of the block is spinning on a flag: let the peers run. A GPU's spinning
  // block costs the host nothing, but here it is a host thread: after a few yields it sleeps,
  // 10 us at first and up to 500 us, or a few dozen blocks waiting for host threads (staged
  // proxies, network proxies, other ranks) take the CPUs those threads need.
  static void idleBackoff(unsigned idleRounds) {
    constexpr unsigned kYieldsFirst = 32;
    if (idleRounds <= kYieldsFirst) {
      sched_yield();
      return;
    }
    const unsigned doublings = std::min(idleRounds - kYieldsFirst - 1, 6u);
    const long usec = std::min(10l << doublings, 500l);
    timespec t{0, usec * 1000};
    nanosleep(&t, nullptr);
  }

  void yield(FiberState why) {
    Fiber* f = running_;
    f->state = why;
    fiberSwitch(&f->ctx, &scheduler_);
  }
  bool launchFaulted() const { return launch_.faulted.load(std::memory_order_relaxed); }

 private:
  Fiber* fiber() {
    auto* f = new Fiber;
    f->block = this;
    if (!spare_.empty()) {
      f->stack = spare_.back();
      spare_.pop_back();
    } else {
      f->stack = stacks().take();
    }
    fiberPrepare(&f->ctx, f->stack, kStackBytes, &BlockRun::entry, f);
    return f;
  }

  // Runs f until it waits or has no thread left to run; false in that case (its stack is kept).
  bool resume(Fiber* f) {
    running_ = f;
    tlsCoords.thread = f->thread;
    f->state = FiberState::Running;
    fiberSwitch(&scheduler_, &f->ctx);
    if (f->state != FiberState::Done) return true;
    spare_.push_back(f->stack);
    delete f;
    return false;
  }

  static void entry(void* arg) {
    auto* f = static_cast<Fiber*>(arg);
    BlockRun* b = f->block;
    while (b->nextThread_ < b->blockDim_) {
      f->thread = b->nextThread_++;
      tlsCoords.thread = f->thread;
      try {
        b->body_();
      } catch (Fault& fault) {
        b->launch_.fail(std::move(fault));
      }
    }
    f->state = FiberState::Done;
    fiberSwitch(&f->ctx, &b->scheduler_);  // never resumed
    std::abort();
  }

  LaunchState& launch_;
  const ThreadBody& body_;
  unsigned blockDim_;
  unsigned nextThread_ = 0;  // the first thread no fiber has started
  FiberContext scheduler_;
  Fiber* running_ = nullptr;
  std::vector<char*> spare_;  // stacks of fibers that ended
};

}  // namespace

void syncBlock() {
  if (tlsBlock) tlsBlock->yield(FiberState::AtBarrier);
}

void spinPause() {
  BlockRun* b = tlsBlock;
  if (b == nullptr) {
    sched_yield();
    return;
  }
  if (b->launchFaulted()) throw Fault{Fault::IllegalAddress, "another thread of this launch faulted"};
  b->yield(FiberState::Paused);
}

uint64_t nowNs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

void misalignedVectorAccess(const void* p) {
  char what[96];
  std::snprintf(what, sizeof what, "16-byte vector access at %p, which is not 16-byte aligned", p);
  throw Fault{Fault::MisalignedAddress, what};
}

std::optional<Fault> runGrid(unsigned gridDim, unsigned blockDim, const PreparedLaunch& launch) {
  ThreadBody body;
  try {
    body = launch();
  } catch (Fault& f) {
    return f;
  }
  LaunchState state;
  std::atomic<unsigned> nextBlock{0};
  auto work = [&] {
    for (unsigned b; (b = nextBlock.fetch_add(1)) < gridDim;) {
      tlsCoords = ThreadCoords{0, b, blockDim, gridDim};
      BlockRun(state, body, blockDim).run();
    }
  };
  const unsigned hosts = std::min(gridDim, kMaxResidentBlocks);
  std::latch helpersDone(hosts - 1);
  for (unsigned i = 1; i < hosts; i++)
    blockThreads().submit([&] {
      work();
      helpersDone.count_down();
    });
  work();
  helpersDone.wait();
  return state.first;
}

}  // namespace accl::kern
