#include "device/cuda/fence_queue.h"
#include "base/log.h"

namespace accl::dev::cuda {

FenceQueue::~FenceQueue() {
  for (auto& p : pending_) api_.eventDestroy(p.event);
  for (CUevent e : spare_) api_.eventDestroy(e);
}

void FenceQueue::fail(CUresult r) {
  if (!failed_) WARN("CUDA backend: a data call failed on the device: %s", errorText(api_, r).c_str());
  failed_ = true;
  error_ = r;
}

Fence FenceQueue::record() {
  if (failed_) return {};
  CUevent ev = nullptr;
  if (!spare_.empty()) {
    ev = spare_.back();
    spare_.pop_back();
  } else if (CUresult r = api_.eventCreate(&ev, kEventDisableTiming); r != kSuccess) {
    fail(r);
    return {};
  }
  if (CUresult r = api_.eventRecord(ev, stream_); r != kSuccess) {
    spare_.push_back(ev);
    fail(r);
    return {};
  }
  pending_.push_back({nextId_, ev});
  return Fence{nextId_++};
}

bool FenceQueue::poll(Fence f) {
  if (!f.pending() || f.id <= completed_ || failed_) return true;
  while (!pending_.empty()) {
    CUresult r = api_.eventQuery(pending_.front().event);
    if (r == kErrorNotReady) break;
    if (r != kSuccess) {
      fail(r);
      return true;
    }
    completed_ = pending_.front().id;
    spare_.push_back(pending_.front().event);
    pending_.pop_front();
  }
  return f.id <= completed_;
}

bool FenceQueue::idle() { return pending_.empty() || poll(Fence{nextId_ - 1}); }

}  // namespace accl::dev::cuda
