// RAII owners of what one rank uses: its stream (an ACCL host stream, or a CUDA stream
// created with cuStreamCreate in device mode) and its ncclMemAlloc'd buffers (host memory,
// or device memory with a host staging copy that the harness fills and checks).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "accl.h"
#include "cuda_session.h"

namespace accl::perf {

class RankStream {
 public:
  enum class State { kDone, kBusy, kFailed };

  RankStream() = default;
  // A host stream; with `cuda`, a non-blocking CUDA stream of the current context instead.
  // *error names the failing call.
  static bool create(CudaSession* cuda, RankStream* out, std::string* error);
  // No stream: NULL is passed to the library (-y 1). Under CUDA that is the default stream.
  static RankStream null(CudaSession* cuda) {
    RankStream s;
    s.cuda_ = cuda;
    return s;
  }
  RankStream(RankStream&& o) noexcept : cuda_(o.cuda_), stream_(std::exchange(o.stream_, nullptr)) {}
  RankStream& operator=(RankStream&& o) noexcept {
    std::swap(cuda_, o.cuda_);
    std::swap(stream_, o.stream_);
    return *this;
  }
  ~RankStream();

  cudaStream_t get() const { return stream_; }
  // Waits until the stream's work is done; false with *error on failure.
  bool synchronize(std::string* error) const;
  State query(std::string* error) const;

 private:
  CudaSession* cuda_ = nullptr;  // null: host stream
  cudaStream_t stream_ = nullptr;
};

class RankBuffer {
 public:
  RankBuffer() = default;
  // ncclMemAlloc'd; with `cuda` (device mode) it is device memory and gets a host staging copy.
  static ncclResult_t allocate(size_t bytes, CudaSession* cuda, RankBuffer* out);
  RankBuffer(RankBuffer&& o) noexcept { *this = std::move(o); }
  RankBuffer& operator=(RankBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(cuda_, o.cuda_);
    std::swap(staging_, o.staging_);
    return *this;
  }
  ~RankBuffer() {
    if (ptr_) ncclMemFree(ptr_);
  }

  // What the library gets (device memory in device mode).
  char* data() const { return static_cast<char*>(ptr_); }
  size_t bytes() const { return bytes_; }
  // Where the harness writes inputs and reads results: the buffer itself, or its staging copy.
  char* hostView() const { return staging_ ? staging_.get() : data(); }
  // Staging copy -> device (after filling) and device -> staging copy (before checking);
  // nothing to do in host mode. false with *error on failure.
  bool upload(size_t offset, size_t bytes, std::string* error) const;
  bool download(size_t offset, size_t bytes, std::string* error) const;

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  CudaSession* cuda_ = nullptr;
  std::unique_ptr<char[]> staging_;
};

}  // namespace accl::perf
