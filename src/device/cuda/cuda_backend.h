// cuda_backend.h: the CUDA backend (issue 10). One per communicator, bound to the device that
// was current when the communicator was created. A collective queued on a user's stream is
// run by this backend's worker thread when the stream reaches it (stream_gate.h); its data
// calls (copies, reduction kernels) go to the backend's own non-blocking stream, with fences
// from fence_queue.h, and the user's stream continues when the worker opens its gate. The
// host never waits for the user's stream.
#pragma once
#include <memory>
#include <string>
#include "device/backend.h"
#include "device/cuda/driver_api.h"
#include "device/cuda/kernel_names.h"

namespace accl::dev::cuda {

class CudaDevice;

// A backend bound to `dev`, its worker started; nullptr with a WARN when it cannot be made.
ncclResult_t makeCudaBackend(CudaDevice& dev, std::shared_ptr<Backend>* out);

// The process-level CUDA backend: ncclMemAlloc/ncclMemFree on the current device. Its stream
// and data calls are never used (communicators have their own).
std::shared_ptr<Backend> makeCudaAllocator(const DriverApi& api);

}  // namespace accl::dev::cuda
