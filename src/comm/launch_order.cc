#include "comm/launch_order.h"
#include <thread>

namespace accl {

void LaunchOrder::orderAfterPrevious(dev::Backend& backend, const dev::StreamRef& s, bool capturing) {
  std::lock_guard<std::mutex> lk(mu_);
  if (mark_.empty()) return;
  if (!capturing && streamId_ != 0 && backend.streamIdentity(s) == streamId_) return;
  if (mark_.word) backend.waitCounter(s, mark_.deviceWord, mark_.seq);
  else backend.waitMarker(s, mark_.event);
}

void LaunchOrder::markLaunched(dev::Backend& backend, const dev::StreamRef& s, bool capturing) {
  if (capturing) return;
  LaunchMark m;
  m.event = backend.newMarker();
  backend.recordMarker(m.event, s);
  markLaunched(m, backend.streamIdentity(s), capturing);
}

void LaunchOrder::markLaunched(const LaunchMark& mark, uint64_t streamId, bool capturing) {
  if (capturing) return;
  std::lock_guard<std::mutex> lk(mu_);
  mark_ = mark;
  streamId_ = mark.empty() ? 0 : streamId;
}

LaunchMark LaunchOrder::last() {
  std::lock_guard<std::mutex> lk(mu_);
  return mark_;
}

bool LaunchOrder::lastDone(dev::Backend& backend, std::chrono::milliseconds limit) {
  return reached(backend, last(), limit);
}

bool LaunchOrder::passed(dev::Backend& backend, const LaunchMark& m) {
  if (m.word) return __atomic_load_n(m.word.get(), __ATOMIC_ACQUIRE) >= m.seq;
  return !m.event || backend.markerReached(m.event);
}

bool LaunchOrder::reached(dev::Backend& backend, const LaunchMark& m, std::chrono::milliseconds limit) {
  const bool forever = limit == std::chrono::milliseconds::max();  // now() + max would overflow
  const auto deadline = std::chrono::steady_clock::now() + (forever ? std::chrono::milliseconds(0) : limit);
  while (!passed(backend, m)) {
    if (!forever && std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

std::function<bool()> LaunchOrder::probe(dev::Backend& backend, const LaunchMark& m) {
  if (!m.word) return backend.markerProbe(m.event);
  std::shared_ptr<const uint64_t> word = m.word;
  const uint64_t seq = m.seq;
  return [word, seq] { return __atomic_load_n(word.get(), __ATOMIC_ACQUIRE) >= seq; };
}

}  // namespace accl
