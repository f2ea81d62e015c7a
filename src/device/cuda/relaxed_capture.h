// relaxed_capture.h: while a RelaxedCapture lives, the calling thread is in relaxed
// stream-capture mode. A user's stream may be capturing in global mode (PyTorch's default) or
// thread-local mode at any time; allocation-type calls (cuMemAlloc, cuMemHostAlloc,
// cuMemHostRegister, cuIpcOpenMemHandle, ...) made then by a thread in either mode fail and
// invalidate that capture. The library's own calls of that kind are not part of any capture, so
// they are made in relaxed mode, as NCCL does for its threads.
#pragma once
#include "device/cuda/driver_api.h"

namespace accl::dev::cuda {

class RelaxedCapture {
 public:
  explicit RelaxedCapture(const DriverApi& api) : api_(api) {
    if (api_.threadExchangeStreamCaptureMode == nullptr) return;
    int mode = kCaptureModeRelaxed;
    if (api_.threadExchangeStreamCaptureMode(&mode) == kSuccess) {
      previous_ = mode;
      changed_ = true;
    }
  }
  ~RelaxedCapture() {
    if (changed_) api_.threadExchangeStreamCaptureMode(&previous_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  const DriverApi& api_;
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace accl::dev::cuda
