// ncclMemAlloc / ncclMemFree under the CUDA backend: device memory of the device current on
// the calling thread (NCCL's meaning), from cuMemAlloc. Only pointers it returned are freed.
#include <map>
#include <mutex>
#include "base/log.h"
#include "device/cuda/cuda_backend.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/pointer_kind.h"

namespace accl::dev::cuda {
namespace {

class CudaAllocator final : public Backend {
 public:
  explicit CudaAllocator(const DriverApi& api) : api_(api) {}
  const char* name() const override { return api_.backendName; }

  ncclResult_t memAlloc(const char* fn, void** ptr, size_t bytes) override {
    CudaDevice* dev = CudaDevice::get(api_, currentDevice(api_));
    if (dev == nullptr) return ncclUnhandledCudaError;
    CUcontext current = nullptr;
    api_.ctxGetCurrent(&current);
    // With no context current, the device's primary context, as the CUDA runtime would.
    ContextScope scope(api_, current ? current : dev->context());
    CUdeviceptr p = 0;
    CUresult r = api_.memAlloc(&p, bytes ? bytes : 1);
    if (r != kSuccess) {
      WARN("%s: device memory allocation of %zu bytes on %s device %d failed: %s", fn, bytes, api_.runtime,
           dev->ordinal(),
           errorText(api_, r).c_str());
      return r == 2 ? ncclSystemError : ncclUnhandledCudaError;  // 2: CUDA_ERROR_OUT_OF_MEMORY
    }
    std::lock_guard<std::mutex> lk(mu_);
    allocations_[p] = dev->context();
    *ptr = reinterpret_cast<void*>(p);
    return ncclSuccess;
  }

  ncclResult_t memFree(const char* fn, void* ptr) override {
    CUcontext ctx = nullptr;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = allocations_.find(reinterpret_cast<CUdeviceptr>(ptr));
      if (it == allocations_.end()) {
        WARN("%s: %p was not returned by ncclMemAlloc (or was already freed)", fn, ptr);
        return ncclInvalidArgument;
      }
      ctx = it->second;
      allocations_.erase(it);
    }
    ContextScope scope(api_, ctx);
    forgetPointerRange(ptr);  // a later allocation there may be of another device
    CUresult r = api_.memFree(reinterpret_cast<CUdeviceptr>(ptr));
    if (r != kSuccess) {
      WARN("%s: cuMemFree(%p) failed: %s", fn, ptr, errorText(api_, r).c_str());
      return ncclUnhandledCudaError;
    }
    return ncclSuccess;
  }

  // Communicators have their own backends; these are never reached.
  ncclResult_t scratch(size_t, Buffer*) override { return unusable("scratch"); }
  ncclResult_t resolveStream(const char* fn, cudaStream_t, StreamRef*) override { return unusable(fn); }
  ncclResult_t enqueue(const StreamRef&, StreamTask) override { return unusable("enqueue"); }
  void orderAfter(const StreamRef&, const std::vector<StreamRef>&) override {}
  Fence copy(const StreamRef&, void*, const void*, size_t, bool) override { return {}; }
  Fence reduce2(const StreamRef&, ncclDataType_t, RedKind, void*, const void*, const void*, size_t) override {
    return {};
  }
  Fence scale(const StreamRef&, ncclDataType_t, void*, const void*, const void*, size_t) override { return {}; }
  Fence divide(const StreamRef&, ncclDataType_t, void*, const void*, int, size_t) override { return {}; }
  bool poll(Fence) override { return true; }
  void waitAny(const std::vector<Fence>&, int64_t) override {}

 private:
  ncclResult_t unusable(const char* what) {
    WARN("%s backend: %s called on the process allocator (internal error)", api_.runtime, what);
    return ncclInternalError;
  }
  const DriverApi& api_;
  std::mutex mu_;
  std::map<CUdeviceptr, CUcontext> allocations_;
};

}  // namespace

std::shared_ptr<Backend> makeCudaAllocator(const DriverApi& api) { return std::make_shared<CudaAllocator>(api); }

}  // namespace accl::dev::cuda
