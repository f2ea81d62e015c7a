// cuda_device.h: what the CUDA backend needs of one device, set up once per process and device:
// its primary context, the kernels of kernels/cuda (embedded in libnccl.so.2, loaded with
// cuModuleLoadData) and the attributes that decide how streams are gated.
#pragma once
#include <map>
#include <mutex>
#include <string>
#include "device/cuda/driver_api.h"
#include "nccl.h"

namespace accl::dev::cuda {

class CudaDevice {
 public:
  // The device `ordinal` of this process, set up on first use; nullptr with a WARN naming
  // the cause when it cannot be (no kernels in this build, context or module failure).
  static CudaDevice* get(const DriverApi& api, int ordinal);

  const DriverApi& api() const { return api_; }
  int ordinal() const { return ordinal_; }
  CUcontext context() const { return ctx_; }
  const std::string& pciBusId() const { return pciBusId_; }
  const Uuid& uuid() const { return uuid_; }
  int multiprocessors() const { return sms_; }
  // Blocks of the collective kernel (kern::kMaxCollThreads threads each) that the device holds at
  // once, over all its SMs; 0 when the driver cannot say.
  int residentCollectiveBlocks() const { return residentCollBlocks_; }
  bool hostPointerIsDevicePointer() const { return hostPtrIsDevPtr_; }
  // A kernel by name, resolved at set-up (kernel_names.h says why), or nullptr with a WARN.
  CUfunction kernel(const std::string& name) const;

 private:
  CudaDevice(const DriverApi& api, int ordinal) : api_(api), ordinal_(ordinal) {}
  ncclResult_t init();

  const DriverApi& api_;
  int ordinal_;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  std::string pciBusId_;
  Uuid uuid_{};
  int sms_ = 1;
  int residentCollBlocks_ = 0;
  bool hostPtrIsDevPtr_ = false;
  std::map<std::string, CUfunction> kernels_;  // filled by init, read-only afterwards
};

// Makes `ctx` current on this thread for the scope, restoring what was current before.
class ContextScope {
 public:
  ContextScope(const DriverApi& api, CUcontext ctx);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const DriverApi& api_;
  CUcontext prev_ = nullptr;
  bool changed_ = false;
};

// The device of the context current on this thread, or 0 when none is current (the CUDA
// runtime's default device, which a program that never called cudaSetDevice runs on).
int currentDevice(const DriverApi& api);

// The embedded fatbin (kernels/cuda/device_kernels.cu); empty when nvcc was not found at
// build time.
const void* embeddedKernels(size_t* bytes);

}  // namespace accl::dev::cuda
