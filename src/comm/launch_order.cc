#include "comm/launch_order.h"
#include <thread>

namespace accl {

void LaunchOrder::orderAfterPrevious(dev::Backend& backend, const dev::StreamRef& s, bool capturing) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!marked_) return;
  if (!capturing && streamId_ != 0 && backend.streamIdentity(s) == streamId_) return;
  backend.waitMarker(s, marker_);
}

void LaunchOrder::markLaunched(dev::Backend& backend, const dev::StreamRef& s, bool capturing) {
  if (capturing) return;
  std::shared_ptr<void> m = backend.newMarker();
  backend.recordMarker(m, s);
  markLaunched(m, backend.streamIdentity(s), capturing);
}

void LaunchOrder::markLaunched(const std::shared_ptr<void>& recorded, uint64_t streamId, bool capturing) {
  if (capturing) return;
  std::lock_guard<std::mutex> lk(mu_);
  marker_ = recorded;
  streamId_ = recorded ? streamId : 0;
  marked_ = marker_ != nullptr;
}

std::shared_ptr<void> LaunchOrder::last() {
  std::lock_guard<std::mutex> lk(mu_);
  return marked_ ? marker_ : nullptr;
}

bool LaunchOrder::lastDone(dev::Backend& backend, std::chrono::milliseconds limit) {
  return reached(backend, last(), limit);
}

bool LaunchOrder::reached(dev::Backend& backend, const std::shared_ptr<void>& m, std::chrono::milliseconds limit) {
  const bool forever = limit == std::chrono::milliseconds::max();  // now() + max would overflow
  const auto deadline = std::chrono::steady_clock::now() + (forever ? std::chrono::milliseconds(0) : limit);
  while (m && !backend.markerReached(m)) {
    if (!forever && std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace accl
