// streams.h: CUDA streams and events for ops on CUDA tensors, with PyTorch's stream semantics.
//
// Like ProcessGroupNCCL, each process group runs its CUDA ops on a side stream of its own (one
// per device, taken from torch's stream pool): the side stream first waits for what the
// caller's current stream has queued (the op's inputs), the op and any copy-back run on it, and
// an event recorded after them lets Work.wait() make the caller's current stream wait - the host
// never blocks. Tensors used on the side stream are recorded with torch's caching allocator so
// their memory is not reused before the op has finished with it.
//
// Everything here goes through c10's device-generic interface (c10::Stream, c10::Event, the
// registered CUDA guard); only the raw cudaStream_t needs CUDA's headers (cuda_stream_handle.cc,
// or cuda_stream_handle_none.cc when the extension is built without them).
#pragma once

#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include "nccl.h"

namespace torch_accl {

// Whether this build of the extension can serve CUDA tensors (it was compiled with CUDA's
// headers against a CUDA build of torch).
bool builtWithCuda();
// The raw cudaStream_t of a CUDA c10::Stream (cuda_stream_handle.cc).
cudaStream_t cudaStreamOf(const c10::Stream& s);

// GPUs torch sees in this process (0 without CUDA support or without a GPU).
int cudaDeviceCount();
// torch's current CUDA device (torch.cuda.current_device()).
c10::Device currentCudaDevice();

// The side stream of one process group on one device.
class SideStream {
 public:
  explicit SideStream(c10::Device device);
  c10::Device device() const { return stream_.device(); }
  const c10::Stream& stream() const { return stream_; }
  cudaStream_t handle() const { return handle_; }
  // Orders this stream after the work queued so far on the caller's current stream.
  void waitForCurrentStream();
  // Tells the caching allocator these tensors are in use on this stream.
  void recordTensors(const std::vector<at::Tensor>& tensors);
  // A new event recorded now on this stream.
  std::shared_ptr<c10::Event> recordEvent();

 private:
  c10::Stream stream_;
  cudaStream_t handle_;
};

// Makes the caller's current stream on `device` wait for `event` (the host does not wait).
void makeCurrentStreamWait(const c10::Event& event, c10::Device device);

}  // namespace torch_accl
