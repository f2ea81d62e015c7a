#include "device/cuda/cuda_device.h"
#include <algorithm>
#include <cstring>
#include <memory>
#include "collective_args.h"
#include "base/log.h"
#include "device/cuda/kernel_names.h"

extern "C" {
// kernels_blob.S: the fatbin built by nvcc, between these two symbols.
extern const char accl_cuda_fatbin_begin[];
extern const char accl_cuda_fatbin_end[];
}

namespace accl::dev::cuda {

const void* embeddedKernels(size_t* bytes) {
  *bytes = static_cast<size_t>(accl_cuda_fatbin_end - accl_cuda_fatbin_begin);
  return accl_cuda_fatbin_begin;
}

CudaDevice* CudaDevice::get(const DriverApi& api, int ordinal) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<CudaDevice>> devices;  // for the life of the process
  std::lock_guard<std::mutex> lk(mu);
  auto it = devices.find(ordinal);
  if (it != devices.end()) return it->second.get();
  std::unique_ptr<CudaDevice> d(new CudaDevice(api, ordinal));
  if (d->init() != ncclSuccess) return nullptr;  // not cached: a later call says why again
  return devices.emplace(ordinal, std::move(d)).first->second.get();
}

ncclResult_t CudaDevice::init() {
  CUdevice dev = 0;
  CUresult r = api_.deviceGet(&dev, ordinal_);
  if (r != kSuccess) {
    WARN("%s device %d: cuDeviceGet failed: %s", api_.runtime, ordinal_, errorText(api_, r).c_str());
    return ncclUnhandledCudaError;
  }
  if ((r = api_.primaryCtxRetain(&ctx_, dev)) != kSuccess) {
    WARN("%s device %d: cannot retain its primary context: %s", api_.runtime, ordinal_, errorText(api_, r).c_str());
    return ncclUnhandledCudaError;
  }
  char bus[64] = {};
  if (api_.deviceGetPCIBusId(bus, sizeof(bus), dev) == kSuccess) pciBusId_ = bus;
  api_.deviceGetUuid(&uuid_, dev);
  int v = 0;
  if (api_.deviceGetAttribute(&v, kAttrMultiprocessorCount, dev) == kSuccess && v > 0) sms_ = v;
  v = 0;
  hostPtrIsDevPtr_ = api_.deviceGetAttribute(&v, kAttrCanUseHostPointerForRegisteredMem, dev) == kSuccess && v;
  size_t bytes = 0;
  // The runtime's own image: the nvcc fatbin, or the clang offload bundle for HIP.
  const void* image = api_.kernelImage ? api_.kernelImage(&bytes) : embeddedKernels(&bytes);
  if (bytes == 0) {
    WARN("%s device %d: this build of ACCL has no %s kernels (%s)", api_.runtime, ordinal_, api_.runtime,
         api_.noKernelsWhy);
    return ncclInvalidUsage;
  }
  ContextScope scope(api_, ctx_);
  if ((r = api_.moduleLoadData(&module_, image)) != kSuccess) {
    WARN("%s device %d (%s): cannot load ACCL's kernels: %s (%s)", api_.runtime, ordinal_, pciBusId_.c_str(),
         errorText(api_, r).c_str(),
         api_.kernelImage
             ? "built for gfx90a and gfx942; is this device another target?"
             : "built for sm 80/90/100 + PTX; is the driver older than the CUDA toolkit ACCL was built with?");
    return ncclUnhandledCudaError;
  }
  for (const std::string& name : libraryKernelNames(std::strcmp(api_.runtime, "HIP") != 0)) {
    CUfunction fn = nullptr;
    if ((r = api_.moduleGetFunction(&fn, module_, name.c_str())) != kSuccess) {
      WARN("%s device %d (%s): kernel %s is missing from ACCL's module: %s", api_.runtime, ordinal_, pciBusId_.c_str(),
           name.c_str(), errorText(api_, r).c_str());
      return ncclUnhandledCudaError;
    }
    kernels_[name] = fn;
  }
  // The collective kernels' blocks of all local ranks wait for each other, so all must be
  // resident at once: how many fit (the smallest figure over the collective kernels).
  if (api_.occupancyMaxActiveBlocksPerMultiprocessor) {
    int fewest = 0;
    for (const auto& [name, fn] : kernels_) {
      if (name.rfind("accl_coll_", 0) != 0) continue;
      int blocks = 0;
      if (api_.occupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, static_cast<int>(kern::kMaxCollThreads), 0) !=
          kSuccess)
        continue;
      fewest = fewest == 0 ? blocks : std::min(fewest, blocks);
    }
    residentCollBlocks_ = fewest * sms_;
  }
  INFO(kSubsysInit, "%s device %d (%s): %zu kernels resolved at set-up, %d SMs (%d collective blocks resident at once), registered host memory %s",
       api_.runtime, ordinal_, pciBusId_.c_str(), kernels_.size(), sms_, residentCollBlocks_, hostPtrIsDevPtr_ ? "at the same address" : "mapped");
  return ncclSuccess;
}

CUfunction CudaDevice::kernel(const std::string& name) const {
  auto it = kernels_.find(name);
  if (it != kernels_.end()) return it->second;
  WARN("%s device %d: no kernel %s among those resolved at set-up (kernel_names.cc does not list it)", api_.runtime, ordinal_,
       name.c_str());
  return nullptr;
}

ContextScope::ContextScope(const DriverApi& api, CUcontext ctx) : api_(api) {
  if (api_.ctxGetCurrent(&prev_) != kSuccess) prev_ = nullptr;
  if (prev_ != ctx) changed_ = api_.ctxSetCurrent(ctx) == kSuccess;
}

ContextScope::~ContextScope() {
  if (changed_) api_.ctxSetCurrent(prev_);
}

int currentDevice(const DriverApi& api) {
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  if (api.ctxGetCurrent(&ctx) == kSuccess && ctx != nullptr && api.ctxGetDevice(&dev) == kSuccess) return dev;
  return 0;
}

}  // namespace accl::dev::cuda
