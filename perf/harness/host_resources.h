// RAII owners of what one rank uses: a host stream and ncclMemAlloc'd memory.
#pragma once

#include <cstddef>
#include <utility>

#include "accl.h"

namespace accl::perf {

class HostStream {
 public:
  HostStream() = default;
  static ncclResult_t create(HostStream* out) { return ncclHostStreamCreate(&out->stream_); }
  HostStream(HostStream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  HostStream& operator=(HostStream&& o) noexcept {
    std::swap(stream_, o.stream_);
    return *this;
  }
  ~HostStream() {
    if (stream_) ncclHostStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static ncclResult_t allocate(size_t bytes, DeviceBuffer* out) {
    out->bytes_ = bytes;
    return ncclMemAlloc(&out->ptr_, bytes ? bytes : 1);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_) ncclMemFree(ptr_);
  }
  char* data() const { return static_cast<char*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace accl::perf
