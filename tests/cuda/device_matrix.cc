#include "cuda/device_matrix.h"
#include <cstdio>

namespace accl_cuda_test {

DriverMatrixDevice::DriverMatrixDevice(const TestDriver& d, bool threadRank) : d_(d) {
  useDevice(0);
  if (d_.streamCreate(&stream_, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) stream_ = nullptr;
  if (threadRank && d_.streamCreate(&nullStandIn_, 0) != CUDA_SUCCESS) nullStandIn_ = nullptr;
  arenaBytes_ = size_t{160} << 20;  // the matrix's largest case, 16 MiB x 4 ranks x 2 buffers, and then some
  if (d_.memAlloc(&arena_, arenaBytes_) != CUDA_SUCCESS) arena_ = 0, arenaBytes_ = 0;
}

DriverMatrixDevice::~DriverMatrixDevice() {
  if (stream_) d_.streamDestroy(stream_);
  if (nullStandIn_) d_.streamDestroy(nullStandIn_);
  if (arena_) d_.memFree(arena_);
}

// A bump allocator that starts over when nothing is live (between cases).
void* DriverMatrixDevice::alloc(size_t bytes) {
  const size_t rounded = (bytes + 255) & ~size_t(255);
  if (top_ + rounded > arenaBytes_) {
    std::fprintf(stderr, "device arena exhausted (%zu + %zu > %zu bytes)\n", top_, rounded, arenaBytes_);
    return nullptr;
  }
  void* p = reinterpret_cast<void*>(arena_ + top_);
  top_ += rounded;
  live_++;
  return p;
}

void DriverMatrixDevice::release(void*) {
  if (--live_ == 0) top_ = 0;
}

void DriverMatrixDevice::upload(void* dev, const void* host, size_t bytes) {
  if (CUresult r = d_.memcpyHtoD(reinterpret_cast<CUdeviceptr>(dev), host, bytes); r != CUDA_SUCCESS)
    std::fprintf(stderr, "cuMemcpyHtoD failed: %d\n", r);
}

void DriverMatrixDevice::download(void* host, const void* dev, size_t bytes) {
  if (CUresult r = d_.memcpyDtoH(host, reinterpret_cast<CUdeviceptr>(dev), bytes); r != CUDA_SUCCESS)
    std::fprintf(stderr, "cuMemcpyDtoH failed: %d\n", r);
}

ncclResult_t DriverMatrixDevice::synchronize(cudaStream_t s) {
  CUresult r = d_.streamSynchronize(reinterpret_cast<CUstream>(s));
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuStreamSynchronize(%p) failed: %d\n", static_cast<void*>(s), r);
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

}  // namespace accl_cuda_test
