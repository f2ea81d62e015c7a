#include "device/cuda/stream_gate.h"
#include "device/cuda/relaxed_capture.h"
#include <new>
#include "base/log.h"

namespace accl::dev::cuda {
namespace {

constexpr size_t kGatesPerChunk = 256;
constexpr size_t kFlagStride = 64;  // each flag on its own cache line: the GPU polls one, the CPU the other

}  // namespace

const char* gateModeName(GateMode m) { return m == GateMode::MemOps ? "stream memory operations" : "gate kernels"; }

ncclResult_t GateSlab::acquire(Gate* out) {
  std::lock_guard<std::mutex> lk(mu_);
  if (free_.empty()) {
    const DriverApi& api = dev_.api();
    ContextScope scope(api, dev_.context());
    RelaxedCapture relaxed(api);
    void* chunk = nullptr;
    const size_t bytes = kGatesPerChunk * 2 * kFlagStride;
    CUresult r = api.memHostAlloc(&chunk, bytes, kMemHostAllocPortable | kMemHostAllocDeviceMap);
    if (r != kSuccess) {
      WARN("CUDA backend: cannot allocate %zu bytes of pinned host memory for stream gates: %s", bytes,
           errorText(api, r).c_str());
      return ncclUnhandledCudaError;
    }
    CUdeviceptr base = 0;
    if ((r = api.memHostGetDevicePointer(&base, chunk, 0)) != kSuccess) {
      api.memFreeHost(chunk);
      WARN("CUDA backend: pinned gate memory has no device address: %s", errorText(api, r).c_str());
      return ncclUnhandledCudaError;
    }
    chunks_.push_back(chunk);
    for (size_t i = 0; i < kGatesPerChunk; i++) {
      char* p = static_cast<char*>(chunk) + i * 2 * kFlagStride;
      Gate g;
      g.start = new (p) std::atomic<uint64_t>(0);
      g.done = new (p + kFlagStride) std::atomic<uint64_t>(0);
      g.startDev = base + i * 2 * kFlagStride;
      g.doneDev = g.startDev + kFlagStride;
      free_.push_back(g);
    }
  }
  *out = free_.back();
  free_.pop_back();
  return ncclSuccess;
}

void GateSlab::release(const Gate& g) {
  std::lock_guard<std::mutex> lk(mu_);
  free_.push_back(g);
}

namespace {

ncclResult_t launchOne(CudaDevice& dev, const char* name, CUstream stream, void** params) {
  CUfunction fn = dev.kernel(name);
  if (fn == nullptr) return ncclUnhandledCudaError;
  CUresult r = dev.api().launchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr);
  if (r != kSuccess) {
    WARN("CUDA backend: cannot launch %s on stream %p: %s", name, static_cast<void*>(stream),
         errorText(dev.api(), r).c_str());
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t gateWrite(CudaDevice& dev, GateMode mode, CUstream stream, CUdeviceptr flag, uint64_t value) {
  if (mode == GateMode::Kernels) {
    unsigned long long v = value;
    void* params[] = {&flag, &v};
    return launchOne(dev, "accl_write_flag", stream, params);
  }
  CUresult r = dev.api().streamWriteValue64(stream, flag, value, kStreamWriteValueDefault);
  if (r != kSuccess) {
    WARN("CUDA backend: cuStreamWriteValue64 on stream %p failed: %s (ACCL_CUDA_STREAM_SYNC=kernel avoids stream "
         "memory operations)",
         static_cast<void*>(stream), errorText(dev.api(), r).c_str());
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

ncclResult_t gateWait(CudaDevice& dev, GateMode mode, CUstream stream, CUdeviceptr flag, uint64_t value, bool equal) {
  if (mode == GateMode::Kernels) {
    unsigned long long v = value;
    int eq = equal ? 1 : 0;
    void* params[] = {&flag, &v, &eq};
    return launchOne(dev, "accl_wait_flag", stream, params);
  }
  CUresult r = dev.api().streamWaitValue64(stream, flag, value, equal ? kStreamWaitValueEq : kStreamWaitValueGeq);
  if (r != kSuccess) {
    WARN("CUDA backend: cuStreamWaitValue64 on stream %p failed: %s (ACCL_CUDA_STREAM_SYNC=kernel avoids stream "
         "memory operations)",
         static_cast<void*>(stream), errorText(dev.api(), r).c_str());
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

}  // namespace accl::dev::cuda
