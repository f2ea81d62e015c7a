// device_matrix.h: the collective matrix's buffers in device memory (MatrixDevice over the
// test driver), one per rank thread or process. Buffers come from one arena allocated up
// front: cuMemFree synchronises the whole device, so a rank freeing memory while another rank
// of this process has a collective queued would wait for that rank's stream, which waits for
// this rank: the deadlock any program with several ranks per GPU in one process must avoid.
#pragma once
#include "common/collective_matrix.h"
#include "cuda/test_driver.h"

namespace accl_cuda_test {

class DriverMatrixDevice final : public accl_test::MatrixDevice {
 public:
  // threadRank: ranks are threads of this process sharing the device (see nullStream());
  // device: the CUDA device its memory and streams are on (made current).
  DriverMatrixDevice(const TestDriver& d, bool threadRank, int device = 0);
  ~DriverMatrixDevice() override;
  void* alloc(size_t bytes) override;
  void release(void* p) override;
  void upload(void* dev, const void* host, size_t bytes) override;
  void download(void* host, const void* dev, size_t bytes) override;
  cudaStream_t stream() override { return reinterpret_cast<cudaStream_t>(stream_); }
  cudaStream_t nullStream() override { return reinterpret_cast<cudaStream_t>(nullStandIn_); }
  ncclResult_t synchronize(cudaStream_t s) override;

 private:
  const TestDriver& d_;
  CUstream stream_ = nullptr;
  CUstream nullStandIn_ = nullptr;
  CUdeviceptr arena_ = 0;
  size_t arenaBytes_ = 0;
  size_t top_ = 0;
  int live_ = 0;
};

}  // namespace accl_cuda_test
