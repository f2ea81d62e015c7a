// cuda_backend.h: the CUDA backend (issue 10). One per communicator, bound to the device that
// was current when the communicator was created. Its collectives are kernel launches on the
// caller's stream, queued by the calling thread at call time (comm/kernel_path.h, and
// comm/staged_path.h past 16 ranks); nothing of a collective runs on a host thread that the
// stream waits for, and the host never waits for the user's stream.
#pragma once
#include <memory>
#include <string>
#include "device/backend.h"
#include "device/cuda/driver_api.h"
#include "device/cuda/kernel_names.h"

namespace accl::dev::cuda {

class CudaDevice;

// A backend bound to `dev`; nullptr with a WARN when it cannot be made.
ncclResult_t makeCudaBackend(CudaDevice& dev, std::shared_ptr<Backend>* out);

// The process-level CUDA backend: ncclMemAlloc/ncclMemFree on the current device. Its stream
// and data calls are never used (communicators have their own).
std::shared_ptr<Backend> makeCudaAllocator(const DriverApi& api);

}  // namespace accl::dev::cuda
