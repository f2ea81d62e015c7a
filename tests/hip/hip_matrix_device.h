// hip_matrix_device.h: the collective matrix's buffers in HIP device memory, one per rank thread
// or process, through HIP calls only (hipMalloc, hipMemcpyAsync, hipStreamCreateWithFlags): the
// HIP twin of tests/cuda/device_matrix.h, with its arena for the same reason (a free
// synchronises the device, which would wait for another rank's queued collective).
#pragma once
#include "common/collective_matrix.h"
#include "hip/fake_hip_api.h"

namespace accl_hip_test {

class HipMatrixDevice final : public accl_test::MatrixDevice {
 public:
  // threadRank: ranks are threads of this process sharing the device (see nullStream());
  // device: the HIP device its memory and streams are on (made current).
  explicit HipMatrixDevice(bool threadRank, int device = 0);
  ~HipMatrixDevice() override;
  void* alloc(size_t bytes) override;
  void release(void* p) override;
  void upload(void* dev, const void* host, size_t bytes) override;
  void download(void* host, const void* dev, size_t bytes) override;
  cudaStream_t stream() override { return reinterpret_cast<cudaStream_t>(stream_); }
  cudaStream_t nullStream() override { return reinterpret_cast<cudaStream_t>(nullStandIn_); }
  ncclResult_t synchronize(cudaStream_t s) override;

 private:
  hipStream_t stream_ = nullptr;
  hipStream_t nullStandIn_ = nullptr;
  char* arena_ = nullptr;
  size_t arenaBytes_ = 0;
  size_t top_ = 0;
  int live_ = 0;
};

}  // namespace accl_hip_test
