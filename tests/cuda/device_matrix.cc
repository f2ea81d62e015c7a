#include "cuda/device_matrix.h"
#include <cstdio>

namespace accl_cuda_test {

DriverMatrixDevice::DriverMatrixDevice(const TestDriver& d, bool threadRank, int device) : d_(d) {
  useDevice(device);
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

// Copies go on this rank's own non-blocking stream and are waited for there. A synchronous
// cuMemcpy runs on the legacy default stream, which waits for every blocking stream of the
// context, including another thread rank's stream that waits for this rank's next collective:
// both would hang (on a GPU as on the fake). And a synchronous copy from pageable memory may
// return before its DMA lands, unordered with the non-blocking streams the collectives use.
void DriverMatrixDevice::upload(void* dev, const void* host, size_t bytes) {
  if (CUresult r = d_.memcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dev), host, bytes, stream_); r != CUDA_SUCCESS)
    std::fprintf(stderr, "cuMemcpyHtoDAsync failed: %d\n", r);
  if (CUresult r = d_.streamSynchronize(stream_); r != CUDA_SUCCESS) std::fprintf(stderr, "upload: sync failed: %d\n", r);
}

void DriverMatrixDevice::download(void* host, const void* dev, size_t bytes) {
  if (CUresult r = d_.memcpyDtoHAsync(host, reinterpret_cast<CUdeviceptr>(dev), bytes, stream_); r != CUDA_SUCCESS)
    std::fprintf(stderr, "cuMemcpyDtoHAsync failed: %d\n", r);
  if (CUresult r = d_.streamSynchronize(stream_); r != CUDA_SUCCESS) std::fprintf(stderr, "download: sync failed: %d\n", r);
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
