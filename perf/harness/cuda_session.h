// The CUDA driver as the perf harness uses it: loaded at run time through the library's own
// loader (src/device/cuda/driver_api.*, compiled into the harness; nothing links libcuda),
// the primary context of each device used (made current on every rank thread before a
// communicator is created on it, as nccl-tests' cudaSetDevice does), device names and PCI
// ids for the "Using devices" lines, and the probe that decides the buffer mode.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "buffer_mode.h"
#include "device/cuda/driver_api.h"

namespace accl::perf {

class CudaSession {
 public:
  // nullptr with the reason in *why when there is no usable driver.
  static std::unique_ptr<CudaSession> open(std::string* why);
  ~CudaSession();
  CudaSession(const CudaSession&) = delete;
  CudaSession& operator=(const CudaSession&) = delete;

  const dev::cuda::DriverApi& api() const { return api_; }
  int deviceCount() const { return deviceCount_; }
  // Makes `device`'s primary context current on the calling thread (retained on first use).
  dev::cuda::CUresult makeCurrent(int device);
  // "NVIDIA H200" when the driver can say, else "CUDA device N".
  std::string deviceName(int device) const;
  // "0000:19:00.0" split into its parts; false when the driver cannot say.
  bool pciId(int device, unsigned* domain, unsigned* bus, unsigned* slot) const;
  // Allocates one small block with the library's ncclMemAlloc on `device` and asks the driver
  // what it is: true for device memory; else *why says what was found, and *failed is set
  // when the probe itself could not run.
  bool libraryGivesDeviceMemory(int device, std::string* why, bool* failed);

 private:
  CudaSession(const dev::cuda::DriverApi& api, int deviceCount);
  const dev::cuda::DriverApi& api_;
  int deviceCount_;
  std::mutex mutex_;
  std::vector<dev::cuda::CUcontext> contexts_;  // retained primary contexts, by device
};

// Decides the buffer mode of this process (see buffer_mode.h). In device mode *session is
// the open driver session; otherwise it is reset. `probeDevice` is the process's first device.
BufferMode chooseBufferMode(BufferRequest request, int probeDevice, std::unique_ptr<CudaSession>* session);

// "file:line 'CUDA_ERROR_...'" text for failure lines.
std::string cudaErrorText(const CudaSession& session, dev::cuda::CUresult r);

}  // namespace accl::perf
