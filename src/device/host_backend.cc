// The host backend: user buffers are CPU memory, the data calls run the CPU kernels of
// kernels/host/ in the calling thread and are complete when they return. A NULL stream means
// "finish before returning"; other streams must be ACCL host streams.
#include <unistd.h>
#include <cstdlib>
#include <map>
#include <mutex>
#include "base/log.h"
#include "base/param.h"
#include "device/backend.h"
#include "device/host_stream.h"

namespace accl::dev {
namespace {

class HostBackend final : public Backend {
 public:
  const char* name() const override { return "host"; }

  // "Device memory" is page-aligned host memory; the registry rejects foreign and double frees.
  ncclResult_t memAlloc(const char* fn, void** ptr, size_t bytes) override {
    size_t rounded = (bytes + 4095) & ~size_t(4095);
    if (rounded < bytes) {
      WARN("%s: size = %zu is too large", fn, bytes);
      return ncclInvalidArgument;
    }
    void* p = std::aligned_alloc(4096, rounded ? rounded : 4096);
    if (p == nullptr) {
      WARN("%s: out of host memory allocating %zu bytes", fn, bytes);
      return ncclSystemError;
    }
    std::lock_guard<std::mutex> lk(mu_);
    allocations_[p] = rounded;
    *ptr = p;
    return ncclSuccess;
  }

  ncclResult_t memFree(const char* fn, void* ptr) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (allocations_.erase(ptr) == 0) {
        WARN("%s: %p was not returned by ncclMemAlloc (or was already freed)", fn, ptr);
        return ncclInvalidArgument;
      }
    }
    std::free(ptr);
    return ncclSuccess;
  }

  ncclResult_t scratch(size_t bytes, Buffer* out) override {
    *out = Buffer(new char[bytes ? bytes : 1], [](char* p) { delete[] p; });
    return ncclSuccess;
  }

  ncclResult_t resolveStream(const char* fn, cudaStream_t s, StreamRef* out) override {
    *out = StreamRef{};
    out->handle = s;
    if (s == nullptr) return ncclSuccess;
    out->host = lookupHostStream(s);
    if (out->host == nullptr) {
      WARN("%s: stream %p is not an ACCL host stream (create one with ncclHostStreamCreate; the host backend cannot "
           "run on CUDA streams; this process uses the %s)",
           fn, static_cast<void*>(s), processBackendWhy().c_str());
      return ncclInvalidArgument;
    }
    out->kind = StreamKind::Host;
    return ncclSuccess;
  }

  ncclResult_t enqueue(const StreamRef& s, StreamTask task) override {
    s.host->enqueue(std::move(task));
    return ncclSuccess;
  }
  ncclResult_t enqueueResumable(const StreamRef& s, ResumableTask task) override {
    s.host->enqueueResumable(std::move(task), param::streamInlineUsec());
    return ncclSuccess;
  }

  void orderAfter(const StreamRef& first, const std::vector<StreamRef>& others) override {
    if (first.kind != StreamKind::Host) return;  // Caller work is done before anything else runs
    auto ev = std::make_shared<HostEvent>();      // shared: each waiting stream keeps it alive
    ev->record(first.host);
    for (const StreamRef& o : others) {
      if (o.kind != StreamKind::Host) continue;
      ev->makeWait(o.host);
      o.host->enqueue([ev] { return ncclSuccess; });
    }
  }

  Fence copy(const StreamRef&, void* dst, const void* src, size_t bytes, bool streaming) override {
    (streaming ? dev::copyStreaming : dev::copy)(dst, src, bytes);
    return {};
  }
  Fence reduce2(const StreamRef&, ncclDataType_t type, RedKind op, void* dst, const void* a, const void* b,
                size_t count) override {
    dev::reduce2(type, op, dst, a, b, count);
    return {};
  }
  Fence scale(const StreamRef&, ncclDataType_t type, void* dst, const void* src, const void* scalar,
              size_t count) override {
    dev::scale(type, dst, src, scalar, count);
    return {};
  }
  Fence divide(const StreamRef&, ncclDataType_t type, void* dst, const void* src, int divisor,
               size_t count) override {
    dev::divide(type, dst, src, divisor, count);
    return {};
  }
  bool poll(Fence) override { return true; }
  void waitAny(const std::vector<Fence>&, int64_t) override {}

 private:
  std::mutex mu_;
  std::map<void*, size_t> allocations_;
};

}  // namespace

std::shared_ptr<Backend> hostBackend() {
  static std::shared_ptr<Backend> b = std::make_shared<HostBackend>();
  return b;
}

}  // namespace accl::dev
