// stream_gate.h: how a user's CUDA stream hands a collective to the backend's worker thread
// and waits for it, without the host waiting for the stream. Each queued task owns a gate: two
// 64-bit flags in pinned, device-mapped host memory. The stream writes `start` when it reaches
// the task (so the task's inputs are ready) and then waits until `done` is written; the worker
// sees `start`, runs the collective, and writes `done`. Written with stream memory operations
// (cuStreamWriteValue64 / cuStreamWaitValue64) or, with ACCL_CUDA_STREAM_SYNC=kernel, by two
// one-thread kernels; both are captured by CUDA graphs, which replay them.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>
#include "device/cuda/cuda_device.h"
#include "nccl.h"

namespace accl::dev::cuda {

// Flag values only grow while a gate is reused (a queued task waits for start >= gen and
// done >= gen), so a stream still waiting on a gate's previous use is never stranded.
struct Gate {
  uint64_t lastGen = 0;  // the last value written to both flags
  std::atomic<uint64_t>* start = nullptr;
  std::atomic<uint64_t>* done = nullptr;
  CUdeviceptr startDev = 0;
  CUdeviceptr doneDev = 0;
};

enum class GateMode { MemOps, Kernels };
const char* gateModeName(GateMode m);

// Gates of one device, carved from pinned chunks that live as long as the process: a stream
// may still reach a gate after its communicator is gone (abort, a graph replayed late), and
// its write must land in memory that is still ours. A released gate is reused.
class GateSlab {
 public:
  explicit GateSlab(CudaDevice& dev) : dev_(dev) {}
  ~GateSlab() = default;  // never destroyed: see above
  GateSlab(const GateSlab&) = delete;
  GateSlab& operator=(const GateSlab&) = delete;
  ncclResult_t acquire(Gate* out);
  void release(const Gate& g);

 private:
  CudaDevice& dev_;
  std::mutex mu_;
  std::vector<void*> chunks_;
  std::vector<Gate> free_;
};

// Queued on `stream` (current context must be the device's): *flag = value.
ncclResult_t gateWrite(CudaDevice& dev, GateMode mode, CUstream stream, CUdeviceptr flag, uint64_t value);
// Queued on `stream`: later work waits until *flag == value (equal) or *flag >= value.
ncclResult_t gateWait(CudaDevice& dev, GateMode mode, CUstream stream, CUdeviceptr flag, uint64_t value, bool equal);

}  // namespace accl::dev::cuda
