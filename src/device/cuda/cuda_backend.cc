#include "device/cuda/cuda_backend.h"
#include <sched.h>
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <vector>
#include <chrono>
#include <cstddef>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/kernel_names.h"
#include "device/cuda/pointer_kind.h"
#include "device/cuda/relaxed_capture.h"
#include "device/host_stream.h"

namespace accl::dev::cuda {

namespace {

const char* redName(RedKind op) {
  switch (op) {
    case RedKind::Sum: return "sum";
    case RedKind::Prod: return "prod";
    case RedKind::Max: return "max";
    case RedKind::Min: return "min";
  }
  return "sum";
}

// CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: special handles with no context of their own.
bool isSpecialStream(cudaStream_t s) {
  auto v = reinterpret_cast<uintptr_t>(s);
  return v == 0 || v == 1 || v == 2;
}

// Events for markers, reused: the pool outlives the backend while markers hold it.
class EventPool : public std::enable_shared_from_this<EventPool> {
 public:
  EventPool(const DriverApi* api, CUcontext ctx) : api_(api), ctx_(ctx) {}
  ~EventPool() {
    ContextScope s(*api_, ctx_);
    for (CUevent e : free_) api_->eventDestroy(e);
  }
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  // An event for the caller (null when the driver cannot make one); it comes back here when
  // the last copy of the pointer goes.
  std::shared_ptr<void> take() {
    CUevent ev = nullptr;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!free_.empty()) {
        ev = free_.back();
        free_.pop_back();
      }
    }
    if (ev == nullptr) {
      ContextScope s(*api_, ctx_);
      if (api_->eventCreate(&ev, kEventDisableTiming) != kSuccess) return nullptr;
    }
    std::shared_ptr<EventPool> self = shared_from_this();
    return std::shared_ptr<void>(ev, [self](void* e) { self->give(static_cast<CUevent>(e)); });
  }

 private:
  void give(CUevent e) {
    std::lock_guard<std::mutex> lk(mu_);
    free_.push_back(e);
  }
  const DriverApi* api_;
  CUcontext ctx_;
  std::mutex mu_;
  std::vector<CUevent> free_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(CudaDevice& dev) : dev_(dev), api_(dev.api()) {}

  ~CudaBackend() override {
    if (inner_) {
      ContextScope scope(api_, dev_.context());
      RelaxedCapture relaxed(api_);
      api_.streamSynchronize(inner_);
      api_.streamDestroy(inner_);
    }
  }

  // The backend's own stream serves set-up and teardown only (zeroing and reading mailboxes):
  // collectives are kernels on the caller's stream, queued by the calling thread.
  ncclResult_t start() {
    ContextScope scope(api_, dev_.context());
    // Non-blocking: a legacy-stream memset would wait for other ranks' kernels on blocking
    // streams of this device.
    CUresult r = api_.streamCreate(&inner_, kStreamNonBlocking);
    if (r != kSuccess) {
      WARN("%s backend: cannot create a stream on device %d: %s", api_.runtime, dev_.ordinal(),
           errorText(api_, r).c_str());
      return ncclUnhandledCudaError;
    }
    INFO(kSubsysInit, "%s backend on device %d (%s): ready (its communicators' collectives are kernels queued on the "
         "caller's stream)", api_.runtime,
         dev_.ordinal(), dev_.pciBusId().c_str());
    return ncclSuccess;
  }

  const char* name() const override { return api_.backendName; }
  // The HIP backend (this one over device/hip/hip_driver.h): for the few messages that name
  // runtime calls or contexts.
  bool hip() const { return std::strcmp(api_.runtime, "HIP") == 0; }
  // The communicator's device (the one this backend drives), for NUMA placement, the NIC next
  // to it and the kernel path's peer access.
  std::string pciBusId(int dev) const override {
    if (dev == dev_.ordinal()) return dev_.pciBusId();
    CudaDevice* other = CudaDevice::get(api_, dev);
    return other ? other->pciBusId() : std::string();
  }

  bool hostBuffers() const override { return false; }
  const void* streamDomain() const override { return &dev_; }

  ncclResult_t memAlloc(const char* fn, void** ptr, size_t bytes) override {
    ContextScope scope(api_, dev_.context());
    RelaxedCapture relaxed(api_);
    CUdeviceptr p = 0;
    CUresult r = api_.memAlloc(&p, bytes ? bytes : 1);
    if (r != kSuccess) {
      WARN("%s: cuMemAlloc of %zu bytes failed: %s", fn, bytes, errorText(api_, r).c_str());
      return ncclUnhandledCudaError;
    }
    *ptr = reinterpret_cast<void*>(p);
    return ncclSuccess;
  }
  ncclResult_t memFree(const char* fn, void* ptr) override {
    ContextScope scope(api_, dev_.context());
    RelaxedCapture relaxed(api_);
    forgetPointerRange(ptr);
    CUresult r = api_.memFree(reinterpret_cast<CUdeviceptr>(ptr));
    if (r != kSuccess) {
      WARN("%s: cuMemFree(%p) failed: %s", fn, ptr, errorText(api_, r).c_str());
      return ncclUnhandledCudaError;
    }
    return ncclSuccess;
  }

  int residentCollectiveBlocks() const override { return dev_.residentCollectiveBlocks(); }
  int multiprocessors() const override { return dev_.multiprocessors(); }

  uint64_t deviceId() const override {
    uint64_t h = 1469598103934665603ull;  // FNV-1a of the PCI bus id: equal on every process
    for (char ch : dev_.pciBusId()) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    return h ? h : 1;
  }

  // Plain cuMemAlloc (memory of the stream-ordered allocator cannot be exported this way).
  ncclResult_t allocShared(size_t bytes, Buffer* out, SharedHandle* handle) override {
    void* p = nullptr;
    if (api_.memAllocShared) {
      // Memory that kernels of other devices and processes poll (mailboxes): the runtime's own
      // kind for it where plain device memory is not coherent across devices (HIP).
      ContextScope scope(api_, dev_.context());
      RelaxedCapture relaxed(api_);
      CUdeviceptr d = 0;
      if (CUresult r = api_.memAllocShared(&d, bytes ? bytes : 1); r != kSuccess) {
        WARN("%s backend: cannot allocate a %zu-byte shared buffer on device %d: %s", api_.runtime, bytes,
             dev_.ordinal(), errorText(api_, r).c_str());
        return ncclUnhandledCudaError;
      }
      p = reinterpret_cast<void*>(d);
    } else {
      NCCLCHECK(memAlloc("CUDA IPC ring", &p, bytes));
    }
    Buffer b(static_cast<char*>(p), [this](char* q) { memFree("CUDA IPC ring", q); });
    ContextScope scope(api_, dev_.context());
    RelaxedCapture relaxed(api_);
    IpcMemHandle h{};
    CUresult r = api_.ipcGetMemHandle(&h, reinterpret_cast<CUdeviceptr>(p));
    if (r != kSuccess) {
      WARN("%s backend: cuIpcGetMemHandle of a %zu-byte ring on device %d failed: %s", api_.runtime, bytes,
           dev_.ordinal(),
           errorText(api_, r).c_str());
      return ncclUnhandledCudaError;
    }
    static_assert(sizeof(h.reserved) == sizeof(handle->bytes));
    std::memcpy(handle->bytes, h.reserved, sizeof(handle->bytes));
    // Zeroed (mailbox counters start at 0), on the backend's non-blocking stream: a legacy
    // stream memset would wait for other ranks' kernels on blocking streams of this device.
    r = api_.memsetD8Async(reinterpret_cast<CUdeviceptr>(p), 0, bytes, inner_);
    if (r == kSuccess) r = api_.streamSynchronize(inner_);
    if (r != kSuccess) {
      WARN("%s backend: cannot zero a %zu-byte shared buffer on device %d: %s", api_.runtime, bytes, dev_.ordinal(),
           errorText(api_, r).c_str());
      return ncclUnhandledCudaError;
    }
    *out = std::move(b);
    return ncclSuccess;
  }

  bool runsCollectiveKernels() const override { return true; }

  ncclResult_t fillDevice(void* p, unsigned char value, size_t bytes) override {
    ContextScope scope(api_, dev_.context());
    RelaxedCapture relaxed(api_);
    CUresult r = api_.memsetD8Async(reinterpret_cast<CUdeviceptr>(p), value, bytes, inner_);
    if (r == kSuccess) r = api_.streamSynchronize(inner_);
    return r == kSuccess ? ncclSuccess : ncclUnhandledCudaError;
  }

  ncclResult_t readDevice(void* host, const void* p, size_t bytes) override {
    ContextScope scope(api_, dev_.context());
    RelaxedCapture relaxed(api_);
    CUresult r = api_.memcpyAsync(reinterpret_cast<CUdeviceptr>(host), reinterpret_cast<CUdeviceptr>(p), bytes,
                                  inner_);
    if (r == kSuccess) r = api_.streamSynchronize(inner_);
    return r == kSuccess ? ncclSuccess : ncclUnhandledCudaError;
  }

  // From the backend's pool: no event is created per call once the pool holds as many as are
  // in use at once (a marker's event goes back when its last holder lets go; re-recording an
  // event nobody holds any more is safe: waits already queued keep the record they saw).
  std::shared_ptr<void> newMarker() override { return events_->take(); }
  void recordMarker(const std::shared_ptr<void>& m, const StreamRef& s) override {
    if (!m) return;
    ContextScope scope(api_, dev_.context());
    api_.eventRecord(static_cast<CUevent>(m.get()), s.handle);
  }
  void waitMarker(const StreamRef& s, const std::shared_ptr<void>& m) override {
    if (!m) return;
    ContextScope scope(api_, dev_.context());
    api_.streamWaitEvent(s.handle, static_cast<CUevent>(m.get()), 0);
  }

  bool markerReached(const std::shared_ptr<void>& m) override {
    if (!m) return true;
    ContextScope scope(api_, dev_.context());
    return api_.eventQuery(static_cast<CUevent>(m.get())) != kErrorNotReady;
  }

  // The HIP table leaves streamWaitValue64 unset: its launches keep the event per call (the HIP
  // runtime's wait on mapped host memory has not been checked on an AMD device).
  bool waitsOnCounters() const override { return api_.streamWaitValue64 != nullptr; }
  void waitCounter(const StreamRef& s, const void* word, uint64_t value) override {
    ContextScope scope(api_, dev_.context());
    api_.streamWaitValue64(s.handle, reinterpret_cast<CUdeviceptr>(word), value, kStreamWaitValueGeq);
  }

  std::function<bool()> completionProbe(const StreamRef& s) override {
    if (streamCapturing(s)) return [] { return true; };
    std::shared_ptr<void> m = newMarker();
    if (!m) return [] { return true; };
    ContextScope scope(api_, dev_.context());
    if (api_.eventRecord(static_cast<CUevent>(m.get()), s.handle) != kSuccess) return [] { return true; };
    return markerProbe(m);
  }

  // Holds only the driver table and the context (both live as long as the process), not the
  // backend: a stream claim may outlive its communicator.
  std::function<bool()> markerProbe(const std::shared_ptr<void>& m) override {
    if (!m) return [] { return true; };
    const DriverApi* api = &api_;
    CUcontext ctx = dev_.context();
    return [api, ctx, m] {
      ContextScope s(*api, ctx);
      return api->eventQuery(static_cast<CUevent>(m.get())) != kErrorNotReady;
    };
  }

  // cuStreamGetId where the driver has it (0: unknown, every launch then waits for the last).
  uint64_t streamIdentity(const StreamRef& s) override {
    if (!api_.streamGetId) return 0;
    ContextScope scope(api_, dev_.context());
    unsigned long long id = 0;
    return api_.streamGetId(s.handle, &id) == kSuccess ? id : 0;
  }

  bool reachDevice(const std::string& busId, bool sameProcess, std::string* why) override {
    if (strcasecmp(busId.c_str(), dev_.pciBusId().c_str()) == 0) return true;
    if (!api_.deviceCanAccessPeer || !api_.ctxEnablePeerAccess) {
      *why = "the driver has no peer access calls";
      return false;
    }
    int count = 0;
    api_.deviceGetCount(&count);
    for (int i = 0; i < count; i++) {
      CUdevice d = 0;
      char bus[64] = {};
      if (api_.deviceGet(&d, i) != kSuccess || api_.deviceGetPCIBusId(bus, sizeof(bus), d) != kSuccess) continue;
      if (strcasecmp(bus, busId.c_str()) != 0) continue;
      CUdevice mine = 0;
      int can = 0;
      api_.deviceGet(&mine, dev_.ordinal());
      if (api_.deviceCanAccessPeer(&can, mine, d) != kSuccess || !can) {
        *why = "device " + std::to_string(dev_.ordinal()) + " cannot access device " + busId + " (no P2P)";
        return false;
      }
      if (!sameProcess) return true;  // cuIpcOpenMemHandle enables it (lazy peer access)
      CudaDevice* peer = CudaDevice::get(api_, i);
      if (peer == nullptr) {
        *why = "device " + busId + " cannot be set up in this process";
        return false;
      }
      ContextScope scope(api_, dev_.context());
      RelaxedCapture relaxed(api_);
      CUresult r = api_.ctxEnablePeerAccess(peer->context(), 0);
      if (r != kSuccess && r != kErrorPeerAccessAlreadyEnabled) {
        *why = "cuCtxEnablePeerAccess(" + busId + ") failed: " + errorText(api_, r);
        return false;
      }
      return true;
    }
    *why = "device " + busId + " is not visible to this process";
    return false;
  }

  bool streamCapturing(const StreamRef& s) override {
    ContextScope scope(api_, dev_.context());
    int capture = kCaptureStatusNone;
    return api_.streamIsCapturing(s.handle, &capture) == kSuccess && capture != kCaptureStatusNone;
  }

  ncclResult_t allocMapped(size_t bytes, Buffer* out, void** devicePtr) override {
    ContextScope scope(api_, dev_.context());
    RelaxedCapture relaxed(api_);
    void* p = nullptr;
    CUresult r = api_.memHostAlloc(&p, bytes, kMemHostAllocPortable | kMemHostAllocDeviceMap);
    CUdeviceptr d = 0;
    if (r == kSuccess) r = api_.memHostGetDevicePointer(&d, p, 0);
    if (r != kSuccess) {
      if (p) api_.memFreeHost(p);
      WARN("%s backend: cannot allocate %zu bytes of mapped host memory for device %d: %s", api_.runtime, bytes,
           dev_.ordinal(),
           errorText(api_, r).c_str());
      return ncclUnhandledCudaError;
    }
    std::memset(p, 0, bytes);
    *devicePtr = reinterpret_cast<void*>(d);
    *out = Buffer(static_cast<char*>(p), [this](char* q) {
      ContextScope s(api_, dev_.context());
      RelaxedCapture relaxed(api_);
      api_.memFreeHost(q);
    });
    return ncclSuccess;
  }

  // Queued from the calling thread straight onto the caller's stream (one graph node when the
  // stream is capturing): nothing is allocated, registered or loaded here. Nothing else is
  // queued: the collective kernel sets its per-launch counters back itself when it ends
  // (kernels/collective_args.h), so a call is one queue entry.
  ncclResult_t launchCollective(const StreamRef& s, ncclDataType_t type, RedKind op,
                                const kern::CollKernelArgs& args) override {
    return launchTyped(s, "accl_coll_", type, op, args, args.nblocks, args.threads);
  }

  ncclResult_t launchDirect(const StreamRef& s, ncclDataType_t type, RedKind op, const kern::DirectArgs& args) override {
    return launchTyped(s, "accl_direct_", type, op, args, static_cast<unsigned>(args.entries * args.blocksPerRank),
                       kern::kDirectThreads);
  }

  bool hasLlKernels() const override { return !hip(); }

  ncclResult_t launchLl(const StreamRef& s, ncclDataType_t type, RedKind op, const kern::DirectArgs& args,
                        unsigned threads) override {
    return launchTyped(s, "accl_ll_", type, op, args, static_cast<unsigned>(args.entries), threads);
  }

  // One launch of <prefix><type>_<op> whose one parameter is `args`.
  template <class Args>
  ncclResult_t launchTyped(const StreamRef& s, const char* prefix, ncclDataType_t type, RedKind op, const Args& args,
                           unsigned blocks, unsigned threads) {
    ContextScope scope(api_, dev_.context());
    const std::string name = kernelName(prefix, type) + "_" + redName(op);
    CUfunction fn = dev_.kernel(name);
    if (fn == nullptr) return ncclInternalError;  // WARNed by kernel()
    Args a = args;
    void* params[] = {&a};
    CUresult r = api_.launchKernel(fn, blocks, 1, 1, threads, 1, 1, 0, s.handle, params, nullptr);
    if (r != kSuccess) {
      WARN("%s backend on device %d: launch of %s (%u blocks of %u threads) on stream %p failed: %s", api_.runtime,
           dev_.ordinal(), name.c_str(), blocks, threads, static_cast<void*>(s.handle), errorText(api_, r).c_str());
      return ncclUnhandledCudaError;
    }
    return ncclSuccess;
  }

  ncclResult_t launchStaged(const StreamRef& s, const kern::StagedArgs& args) override {
    ContextScope scope(api_, dev_.context());
    CUfunction fn = dev_.kernel("accl_staged");
    if (fn == nullptr) return ncclInternalError;  // WARNed by kernel()
    kern::StagedArgs a = args;
    void* params[] = {&a};
    CUresult r = api_.launchKernel(fn, 1, 1, 1, kern::kStagedThreads, 1, 1, 0, s.handle, params, nullptr);
    if (r != kSuccess) {
      WARN("%s backend on device %d: launch of accl_staged on stream %p failed: %s", api_.runtime, dev_.ordinal(),
           static_cast<void*>(s.handle), errorText(api_, r).c_str());
      return ncclUnhandledCudaError;
    }
    return ncclSuccess;
  }

  ncclResult_t openShared(const SharedHandle& handle, Buffer* out) override {
    ContextScope scope(api_, dev_.context());
    RelaxedCapture relaxed(api_);
    IpcMemHandle h{};
    std::memcpy(h.reserved, handle.bytes, sizeof(h.reserved));
    CUdeviceptr p = 0;
    CUresult r = api_.ipcOpenMemHandle(&p, h, kIpcMemLazyEnablePeerAccess);
    if (r != kSuccess) {
      WARN("%s backend: cuIpcOpenMemHandle on device %d failed: %s (has the peer process exited?)", api_.runtime,
           dev_.ordinal(),
           errorText(api_, r).c_str());
      return ncclUnhandledCudaError;
    }
    *out = Buffer(reinterpret_cast<char*>(p), [this](char* q) {
      ContextScope s(api_, dev_.context());
      RelaxedCapture relaxed(api_);
      forgetPointerRange(q);
      api_.ipcCloseMemHandle(reinterpret_cast<CUdeviceptr>(q));
    });
    return ncclSuccess;
  }

  // Collectives of a CUDA communicator are kernels that need no scratch (comm/kernel_path.h,
  // comm/staged_path.h); the host path's planner, which asks for it, never plans for one.
  ncclResult_t scratch(size_t bytes, Buffer* out) override {
    (void)out;
    WARN("%s backend on device %d: %zu bytes of scratch asked for, but nothing on a CUDA communicator runs "
         "through the host path (internal error)", api_.runtime,
         dev_.ordinal(), bytes);
    return ncclInternalError;
  }

  ncclResult_t checkBuffer(const char* fn, const char* what, const void* p) override {
    PointerInfo info = pointerInfo(api_, p);
    // A cached range that says "another device" may be a freed allocation the user's own free
    // left cached: the driver is asked again before anything is refused.
    if (info.cached && info.kind == PointerKind::Device && info.device != dev_.ordinal())
      info = pointerInfo(api_, p, true);
    if (info.kind == PointerKind::Host && deviceAddress(p) == nullptr) {
      WARN("%s: %s %p is host memory that the device cannot reach, but this communicator runs on %s device %d: "
           "pass device memory (%s, ncclMemAlloc) or mapped pinned host memory (%s), or set ACCL_BACKEND=host to run "
           "on host buffers",
           fn, what, p, api_.runtime, dev_.ordinal(), hip() ? "hipMalloc" : "cudaMalloc",
           hip() ? "hipHostMalloc, hipHostRegister with hipHostRegisterMapped"
                 : "cudaHostAlloc, cudaHostRegister with cudaHostRegisterMapped");
      return ncclInvalidArgument;
    }
    if (info.kind == PointerKind::Device && info.device != dev_.ordinal()) {
      WARN("%s: %s %p is memory of %s device %d, but this communicator is bound to device %d (the device current "
           "when it was created)",
           fn, what, p, api_.runtime, info.device, dev_.ordinal());
      return ncclInvalidArgument;
    }
    return ncclSuccess;
  }

  ncclResult_t resolveStream(const char* fn, cudaStream_t s, StreamRef* out) override {
    *out = StreamRef{};
    out->handle = s;
    out->kind = StreamKind::Device;
    if (isSpecialStream(s)) return ncclSuccess;
    if (lookupHostStream(s) != nullptr) {
      WARN("%s: stream %p is an ACCL host stream, but this communicator runs on %s device %d: pass a %s stream, "
           "or set ACCL_BACKEND=host to run on host buffers and host streams",
           fn, static_cast<void*>(s), api_.runtime, dev_.ordinal(), api_.runtime);
      return ncclInvalidArgument;
    }
    CUcontext ctx = nullptr;
    CUresult r = api_.streamGetCtx(s, &ctx);
    if (r != kSuccess) {
      WARN("%s: stream %p is not a usable %s stream: %s", fn, static_cast<void*>(s), api_.runtime,
           errorText(api_, r).c_str());
      return ncclInvalidArgument;
    }
    if (ctx != dev_.context()) {
      // HIP has no contexts here: its "context" is the stream's device.
      if (hip())
        WARN("%s: stream %p belongs to another HIP device than this communicator's (device %d)", fn,
             static_cast<void*>(s), dev_.ordinal());
      else
        WARN("%s: stream %p belongs to another CUDA context than this communicator's (device %d's primary context)",
             fn, static_cast<void*>(s), dev_.ordinal());
      return ncclInvalidArgument;
    }
    return ncclSuccess;
  }

  // Nothing of a CUDA communicator is handed to a host thread through the stream: a wait the
  // driver cannot see would hang behind the caller's own stream (docs/gpu.md, "Who waits for whom").
  ncclResult_t enqueue(const StreamRef& s, StreamTask task) override {
    (void)task;
    WARN("%s backend on device %d: work for stream %p reached the host path (internal error): CUDA communicators "
         "run their collectives as kernels on the caller's stream", api_.runtime,
         dev_.ordinal(), static_cast<void*>(s.handle));
    return ncclInternalError;
  }

  void orderAfter(const StreamRef& first, const std::vector<StreamRef>& others) override {
    std::shared_ptr<void> m = newMarker();  // back to the pool once the waits are queued
    if (!m) return;
    ContextScope scope(api_, dev_.context());
    const auto ev = static_cast<CUevent>(m.get());
    if (api_.eventRecord(ev, first.handle) == kSuccess)
      for (const StreamRef& o : others) api_.streamWaitEvent(o.handle, ev, 0);
  }

  // Data calls, straight onto the caller's stream (the kernel path's stream-ordered copies
  // aside): complete in stream order, so their fences are complete at once.
  Fence copy(const StreamRef& s, void* dst, const void* src, size_t bytes, bool) override {
    ContextScope scope(api_, dev_.context());
    CUresult r = api_.memcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes,
                                  s.handle);
    if (r != kSuccess) return fail("cuMemcpyAsync", r);
    return {};
  }

  Fence reduce2(const StreamRef& s, ncclDataType_t type, RedKind op, void* dst, const void* a, const void* b,
                size_t count) override {
    ContextScope scope(api_, dev_.context());
    const std::string kernel = kernelName("accl_reduce2_", type);
    if (kernel.empty()) return fail("reduce2: datatype", kErrorInvalidValue);
    void* pd = onDevice(dst);
    const void* pa = onDevice(a);
    const void* pb = onDevice(b);
    if (failed()) return {};
    size_t n = count;
    void* params[] = {&pd, &pa, &pb, &n};
    launch(s.handle, kernel + "_" + redName(op), count, params);
    return {};
  }

  Fence scale(const StreamRef& s, ncclDataType_t type, void* dst, const void* src, const void* scalar,
              size_t count) override {
    const void* pk = onDevice(scalar);
    return elementwise(s, "scale", "accl_scale_", type, dst, src, count, &pk);
  }

  Fence divide(const StreamRef& s, ncclDataType_t type, void* dst, const void* src, int divisor,
               size_t count) override {
    int dv = divisor;
    return elementwise(s, "divide", "accl_divide_", type, dst, src, count, &dv);
  }

  bool poll(Fence) override { return true; }
  void waitAny(const std::vector<Fence>&, int64_t) override {}
  bool failed() const override { return failed_; }

  // Where a kernel reaches p: device (or managed) memory as it is; registered host memory
  // through its device mapping, which exists only for memory registered with DEVICEMAP (the
  // same address where the device says so); nullptr for pageable memory.
  void* deviceAddress(const void* p) {
    const PointerInfo info = pointerInfo(api_, p);
    if (!info.known) return nullptr;  // pageable host memory
    if (info.kind != PointerKind::Host) return const_cast<void*>(p);
    CUdeviceptr mapped = 0;
    if (api_.memHostGetDevicePointer(&mapped, const_cast<void*>(p), 0) != kSuccess) return nullptr;
    return reinterpret_cast<void*>(mapped);
  }

  const void* kernelAddress(const void* p) override {
    if (p == nullptr) return p;
    void* d = deviceAddress(p);
    return d ? d : p;
  }

 private:
  // A data call's operand as its kernel reaches it; pageable host memory cannot be (an error).
  void* onDevice(const void* p) {
    if (p == nullptr) return nullptr;
    void* d = deviceAddress(p);
    if (d == nullptr) fail("a data call with an operand in pageable host memory", kErrorInvalidValue);
    return d;
  }

  void launch(CUstream st, const std::string& kernel, size_t count, void** params) {
    CUfunction fn = dev_.kernel(kernel);
    if (fn == nullptr) {
      fail(kernel.c_str(), kErrorInvalidValue);
      return;
    }
    constexpr unsigned kThreads = 256;
    const size_t wanted = (count + kThreads - 1) / kThreads;
    const unsigned blocks = static_cast<unsigned>(
        std::max<size_t>(1, std::min<size_t>(wanted, static_cast<size_t>(dev_.multiprocessors()) * 8)));
    CUresult r = api_.launchKernel(fn, blocks, 1, 1, kThreads, 1, 1, 0, st, params, nullptr);
    if (r != kSuccess) fail(kernel.c_str(), r);
  }

  // scale and divide: dst[i] = src[i] (op) x by one kernel per type taking (dst, src, x, count).
  Fence elementwise(const StreamRef& s, const char* what, const char* stem, ncclDataType_t type, void* dst,
                    const void* src, size_t count, void* x) {
    ContextScope scope(api_, dev_.context());
    const std::string kernel = kernelName(stem, type);
    if (kernel.empty()) return fail((std::string(what) + ": datatype").c_str(), kErrorInvalidValue);
    void* pd = onDevice(dst);
    const void* ps = onDevice(src);
    if (failed()) return {};
    size_t n = count;
    void* params[] = {&pd, &ps, x, &n};
    launch(s.handle, kernel, count, params);
    return {};
  }

  Fence fail(const char* what, CUresult r) {
    if (!failed_)
      WARN("%s backend on device %d: %s failed: %s", api_.runtime, dev_.ordinal(), what, errorText(api_, r).c_str());
    failed_ = true;
    return {};
  }

  CudaDevice& dev_;
  const DriverApi& api_;
  CUstream inner_ = nullptr;  // set-up and teardown only
  std::shared_ptr<EventPool> events_ = std::make_shared<EventPool>(&api_, dev_.context());
  std::atomic<bool> failed_{false};
};

}  // namespace

ncclResult_t makeCudaBackend(CudaDevice& dev, std::shared_ptr<Backend>* out) {
  auto b = std::make_shared<CudaBackend>(dev);
  NCCLCHECK(b->start());
  *out = std::move(b);
  return ncclSuccess;
}

}  // namespace accl::dev::cuda
