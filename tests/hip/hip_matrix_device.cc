#include "hip/hip_matrix_device.h"
#include <cstdio>

namespace accl_hip_test {

HipMatrixDevice::HipMatrixDevice(bool threadRank, int device) {
  hipSetDevice(device);
  if (hipStreamCreateWithFlags(&stream_, hipStreamNonBlocking) != hipSuccess) stream_ = nullptr;
  if (threadRank && hipStreamCreateWithFlags(&nullStandIn_, 0) != hipSuccess) nullStandIn_ = nullptr;
  arenaBytes_ = size_t{160} << 20;  // the matrix's largest case, 16 MiB x 4 ranks x 2 buffers, and then some
  void* p = nullptr;
  if (hipMalloc(&p, arenaBytes_) != hipSuccess) p = nullptr, arenaBytes_ = 0;
  arena_ = static_cast<char*>(p);
}

HipMatrixDevice::~HipMatrixDevice() {
  if (stream_) hipStreamDestroy(stream_);
  if (nullStandIn_) hipStreamDestroy(nullStandIn_);
  if (arena_) hipFree(arena_);
}

// A bump allocator that starts over when nothing is live (between cases).
void* HipMatrixDevice::alloc(size_t bytes) {
  const size_t rounded = (bytes + 255) & ~size_t(255);
  if (top_ + rounded > arenaBytes_) {
    std::fprintf(stderr, "device arena exhausted (%zu + %zu > %zu bytes)\n", top_, rounded, arenaBytes_);
    return nullptr;
  }
  void* p = arena_ + top_;
  top_ += rounded;
  live_++;
  return p;
}

void HipMatrixDevice::release(void*) {
  if (--live_ == 0) top_ = 0;
}

// On this rank's own non-blocking stream, waited for there (tests/cuda/device_matrix.cc says why).
void HipMatrixDevice::upload(void* dev, const void* host, size_t bytes) {
  if (hipError_t r = hipMemcpyAsync(dev, host, bytes, hipMemcpyDefault, stream_); r != hipSuccess)
    std::fprintf(stderr, "hipMemcpyAsync (upload) failed: %d\n", r);
  if (hipError_t r = hipStreamSynchronize(stream_); r != hipSuccess) std::fprintf(stderr, "upload: sync failed: %d\n", r);
}

void HipMatrixDevice::download(void* host, const void* dev, size_t bytes) {
  if (hipError_t r = hipMemcpyAsync(host, dev, bytes, hipMemcpyDefault, stream_); r != hipSuccess)
    std::fprintf(stderr, "hipMemcpyAsync (download) failed: %d\n", r);
  if (hipError_t r = hipStreamSynchronize(stream_); r != hipSuccess)
    std::fprintf(stderr, "download: sync failed: %d\n", r);
}

ncclResult_t HipMatrixDevice::synchronize(cudaStream_t s) {
  hipError_t r = hipStreamSynchronize(reinterpret_cast<hipStream_t>(s));
  if (r != hipSuccess) {
    std::fprintf(stderr, "hipStreamSynchronize(%p) failed: %d\n", static_cast<void*>(s), r);
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

}  // namespace accl_hip_test
