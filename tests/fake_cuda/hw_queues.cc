// hw_queues.cc: the GPU's hardware work queues ("connections"). A context's streams share
// CUDA_DEVICE_MAX_CONNECTIONS in-order queues (default 8, 1..32; read once per process). Stream
// number i of a context, in creation order, uses queue i % N; the default stream is number 0
// and created streams (graph launch helpers included) count from 1, so with the default 8 the
// 8th created stream shares queue 0 with the default stream and the 9th shares queue 1 with the
// first. (The real driver's mapping is not documented; this one is deterministic so tests can
// rely on it.)
// Each operation takes a ticket on its stream's queue when it is queued; it may start only when
// every operation ticketed before it on that queue has started. A kernel has started when it
// begins to run (a spinning kernel does not block the queue); every other operation (a stream
// memory wait, an event wait, a host function, a copy) counts as started only once it is done,
// i.e. a wait once satisfied. So an unsatisfied wait at the head of a queue holds everything
// behind it, on every stream of that queue, as the GPU's front end does.
#include <chrono>
#include <cstdlib>
#include <map>
#include "internal.h"

namespace fakecuda {
namespace {

int connections() {
  static const int n = [] {
    const char* env = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    int v = env && *env ? std::atoi(env) : 8;
    return v < 1 ? 1 : v > 32 ? 32 : v;
  }();
  return n;
}

struct ContextQueues {
  std::vector<HwQueue*> queues;  // never freed: stream threads may run at exit
  int created = 0;               // streams created so far (the default stream is not counted)
};

struct Table {
  std::mutex mu;
  std::map<Context*, ContextQueues> byContext;
};
Table& table() {
  static Table* t = new Table;
  return *t;
}

// The operation the calling stream worker runs now: its queue and whether it has started.
struct Running {
  HwQueue* queue = nullptr;
  bool started = true;
};
thread_local Running tRunning;

}  // namespace

HwQueue* assignHwQueue(Context* ctx, bool defaultStream) {
  if (ctx == nullptr) return nullptr;
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  ContextQueues& cq = t.byContext[ctx];
  if (cq.queues.empty()) {
    for (int i = 0; i < connections(); i++) {
      cq.queues.push_back(new HwQueue);
      cq.queues.back()->index = i;
      cq.queues.back()->of = connections();
    }
  }
  const int number = defaultStream ? 0 : ++cq.created;
  return cq.queues[number % connections()];
}

uint64_t HwQueue::ticket(const void* stream) {
  std::lock_guard<std::mutex> g(mu);
  owners.push_back(stream);
  return issued++;
}

void HwQueue::awaitTurn(uint64_t ticket, const void* stream) {
  std::unique_lock<std::mutex> g(mu);
  const auto since = std::chrono::steady_clock::now();
  bool said = false;
  while (started != ticket) {
    cv.wait_for(g, std::chrono::seconds(1));
    if (!said && started != ticket && std::chrono::steady_clock::now() - since > std::chrono::seconds(5)) {
      said = true;
      report("stream %p has waited 5 s for its turn on hardware queue %d of %d (CUDA_DEVICE_MAX_CONNECTIONS): "
             "stream %p is at the head with an operation that cannot start (a wait not yet satisfied, or its "
             "stream still runs the previous operation); on a GPU this is a hang if that wait depends on work "
             "queued behind it",
             stream, index, of, owners.empty() ? nullptr : owners.front());
    }
  }
}

void HwQueue::release() {
  {
    std::lock_guard<std::mutex> g(mu);
    started++;
    if (!owners.empty()) owners.pop_front();
  }
  cv.notify_all();
}

void beginRunning(HwQueue* q) { tRunning = {q, q == nullptr}; }

void operationStarted() {
  if (tRunning.started) return;
  tRunning.started = true;
  tRunning.queue->release();
}

void endRunning() { operationStarted(); }

}  // namespace fakecuda
