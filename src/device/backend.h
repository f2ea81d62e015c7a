// backend.h: the device seam. Everything the library does to user data and memory goes through
// the Backend of the communicator: allocation (ncclMemAlloc, scratch), what a stream argument
// means and how work is queued on it, and copy/reduce/scale calls that are queued on a stream
// and hand back a Fence to wait on. The host backend (host_backend.cc) runs the CPU kernels of
// kernels/host/ and completes every call before returning; a device backend (CUDA, later HIP)
// queues kernels and completes fences later. Nothing above this header knows which it has.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "collective_args.h"
#include "direct_args.h"
#include "staged_args.h"
#include "device.h"
#include "nccl.h"

namespace accl {
class HostStream;
}

namespace accl::dev {

// What a stream argument means, decided once per call by the communicator's backend.
enum class StreamKind : uint8_t {
  Caller,  // host backend, NULL stream: the calling thread runs the work before returning
  Host,    // an ACCL host stream: its worker thread runs the work, in order
  Device,  // a device stream (CUDA): ordered on it; the host does not wait
};

struct StreamRef {
  StreamKind kind = StreamKind::Caller;
  cudaStream_t handle = nullptr;  // as the user passed it
  HostStream* host = nullptr;     // kind == Host

  bool operator==(const StreamRef& o) const { return handle == o.handle && kind == o.kind; }
};

// Handed back by a data call: it completes when the call's writes are visible and its reads
// are done, so the ring space it touched can be committed or released. Id 0 means it was
// already complete when returned (always, on the host backend).
struct Fence {
  uint64_t id = 0;
  bool pending() const { return id != 0; }
};

// Memory from a backend, returned to it when the Buffer goes away.
class Buffer {
 public:
  Buffer() = default;
  Buffer(char* p, std::function<void(char*)> release) : p_(p, std::move(release)) {}
  char* get() const { return p_.get(); }

 private:
  std::unique_ptr<char, std::function<void(char*)>> p_;
};

// Names device memory that another process of this host can map (a CUDA IPC handle): what a
// device transport publishes so peers can write into its rings.
struct SharedHandle {
  unsigned char bytes[64];
};

using StreamTask = std::function<ncclResult_t()>;
// A task that can run in slices: with budgetUsec >= 0 it runs on the enqueuing thread and may
// stop once it has waited that long without progress, leaving *done false; with budget -1 it
// runs on the stream's own thread, to the end.
using ResumableTask = std::function<ncclResult_t(int64_t budgetUsec, bool* done)>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // PCI bus id ("0000:3b:00.0") of device `dev`, for placing helper threads and choosing the
  // NIC next to it; "" when ranks have no device (the host backend).
  virtual std::string pciBusId(int dev) const {
    (void)dev;
    return "";
  }

  // ncclMemAlloc / ncclMemFree: `fn` names the entry point in WARN lines.
  virtual ncclResult_t memAlloc(const char* fn, void** ptr, size_t bytes) = 0;
  virtual ncclResult_t memFree(const char* fn, void* ptr) = 0;
  // Working memory for one work (pre-scaled PreMulSum inputs, staged sends), of the kind the
  // data calls below read and write.
  virtual ncclResult_t scratch(size_t bytes, Buffer* out) = 0;

  // For device transports. A stable id of the device this backend drives (a hash of its PCI
  // bus id); 0 when user data is host memory (the host backend), which has no device rings.
  virtual uint64_t deviceId() const { return 0; }
  // Device memory the data calls can use, exported so peers on this host can map it.
  virtual ncclResult_t allocShared(size_t bytes, Buffer* out, SharedHandle* handle) {
    (void)bytes, (void)out, (void)handle;
    return ncclInvalidUsage;
  }
  // Collectives as kernels on the caller's stream (kernels/collective_kernel.h): whether this
  // backend runs them, and what they need. allocShared memory is zeroed; allocMapped gives
  // host memory a kernel can poll (*devicePtr: where the kernel reaches it), e.g. the word
  // ncclCommAbort sets so that waiting kernels give up. launchCollective queues one launch
  // of the kernel for (type, op) with args.nblocks blocks of args.threads threads on s (a Device
  // stream), from the calling thread, at call time, and nothing else: the kernel keeps its own
  // counters (they only grow, or the launch's last block sets them back; collective_args.h).
  virtual bool runsCollectiveKernels() const { return false; }
  // Blocks of the collective kernel that the device holds at once (0: cannot say), and its
  // multiprocessors (0: cannot say), which the grid tuner scales the blocks per rank by.
  virtual int residentCollectiveBlocks() const { return 0; }
  virtual int multiprocessors() const { return 0; }
  // Device memory (this device's, or a peer's mapped with openShared): set `bytes` to `value`,
  // or copy them to the host; on the backend's own stream, waited for. For set-up and teardown.
  virtual ncclResult_t fillDevice(void* p, unsigned char value, size_t bytes) {
    (void)p, (void)value, (void)bytes;
    return ncclInvalidUsage;
  }
  virtual ncclResult_t readDevice(void* host, const void* p, size_t bytes) {
    (void)host, (void)p, (void)bytes;
    return ncclInvalidUsage;
  }
  // Whether this device's kernels can reach memory of the device with PCI bus id `busId` (the
  // same device, or a peer with access, which is enabled here for `sameProcess` peers; other
  // processes' memory is opened with peer access). false with *why when not.
  virtual bool reachDevice(const std::string& busId, bool sameProcess, std::string* why) {
    (void)busId, (void)sameProcess;
    *why = "no device";
    return false;
  }
  // An event owned by the caller, for ordering launches across streams: record it on one
  // stream, make another wait for that record (no reference to the first stream is kept, so it
  // may be destroyed meanwhile). Null where the backend has no events.
  virtual std::shared_ptr<void> newMarker() { return nullptr; }
  virtual void recordMarker(const std::shared_ptr<void>& m, const StreamRef& s) { (void)m, (void)s; }
  virtual void waitMarker(const StreamRef& s, const std::shared_ptr<void>& m) { (void)s, (void)m; }
  // Whether the work queued before the marker's last record has run.
  virtual bool markerReached(const std::shared_ptr<void>& m) { return (void)m, true; }
  // Whether waitCounter works: the kernel path then orders a rank's launches across streams by
  // the word its kernels store when they end (kernels/launch_done.h), with no event per call.
  virtual bool waitsOnCounters() const { return false; }
  // Makes `s` wait until the 64-bit word at device address `word` holds at least `value`.
  virtual void waitCounter(const StreamRef& s, const void* word, uint64_t value) { (void)s, (void)word, (void)value; }
  // A probe that says whether everything queued on `s` so far has run (an event recorded now);
  // always true for a capturing stream (its work runs when the graph is launched).
  virtual std::function<bool()> completionProbe(const StreamRef& s) {
    (void)s;
    return [] { return true; };
  }
  // A probe that says whether the device has reached marker m (null: at once); it may be kept
  // after this backend is gone.
  virtual std::function<bool()> markerProbe(const std::shared_ptr<void>& m) {
    (void)m;
    return [] { return true; };
  }
  // A process-unique identity of stream s, never given to another stream (unlike handles,
  // which the driver may reuse once a stream is destroyed); 0 when the backend cannot tell.
  virtual uint64_t streamIdentity(const StreamRef& s) { return (void)s, 0; }
  // Where this backend's kernels reach user memory at p: p itself, or the device mapping of
  // mapped pinned host memory (null stays null).
  virtual const void* kernelAddress(const void* p) { return p; }
  // Whether work queued on `s` now is being captured into a graph.
  virtual bool streamCapturing(const StreamRef& s) {
    (void)s;
    return false;
  }
  virtual ncclResult_t allocMapped(size_t bytes, Buffer* out, void** devicePtr) {
    (void)bytes, (void)out, (void)devicePtr;
    return ncclInvalidUsage;
  }
  virtual ncclResult_t launchCollective(const StreamRef& s, ncclDataType_t type, RedKind op,
                                        const kern::CollKernelArgs& args) {
    (void)s, (void)type, (void)op, (void)args;
    return ncclInvalidUsage;
  }
  // Queues one launch of the direct kernel (kernels/direct_kernel.h): args.entries x
  // args.blocksPerRank blocks of kern::kDirectThreads on s, at call time.
  virtual ncclResult_t launchDirect(const StreamRef& s, ncclDataType_t type, RedKind op, const kern::DirectArgs& args) {
    (void)s, (void)type, (void)op, (void)args;
    return ncclInvalidUsage;
  }
  // Whether launchLl has kernels to launch (the CUDA build; clang's HIP build leaves them out,
  // kernels/ll_kernel.h says why).
  virtual bool hasLlKernels() const { return false; }
  // Queues one launch of the LL kernel (kernels/ll_kernel.h): args.entries blocks of `threads`
  // on s, at call time.
  virtual ncclResult_t launchLl(const StreamRef& s, ncclDataType_t type, RedKind op, const kern::DirectArgs& args,
                                unsigned threads) {
    (void)s, (void)type, (void)op, (void)args, (void)threads;
    return ncclInvalidUsage;
  }
  // Queues one launch of the staged kernel (kernels/staged_kernel.h, one block) on s, from the
  // calling thread, at call time: the collectives of communicators the collective kernel
  // cannot serve.
  virtual ncclResult_t launchStaged(const StreamRef& s, const kern::StagedArgs& args) {
    (void)s, (void)args;
    return ncclInvalidUsage;
  }
  // Maps memory another process exported with allocShared; unmapped when *out goes away.
  virtual ncclResult_t openShared(const SharedHandle& handle, Buffer* out) {
    (void)handle, (void)out;
    return ncclInvalidUsage;
  }

  // Backends with the same domain share their streams: a stream handle names the same stream
  // in both (the CUDA backends of one device), which stream claims (sched/stream_claims.h)
  // need to tell two ranks queued on one stream.
  virtual const void* streamDomain() const { return this; }
  // User buffers of this backend are host memory (the CPU may read and write them directly,
  // as the ShmDirect board does).
  virtual bool hostBuffers() const { return true; }
  // A user buffer this backend cannot use gets a WARN naming `fn` and `what` ("sendbuff").
  virtual ncclResult_t checkBuffer(const char* fn, const char* what, const void* p) {
    (void)fn, (void)what, (void)p;
    return ncclSuccess;
  }
  // What `s` means on this backend; an unusable stream gets a WARN naming `fn` and
  // ncclInvalidArgument.
  virtual ncclResult_t resolveStream(const char* fn, cudaStream_t s, StreamRef* out) = 0;
  // Runs `task` in order on a stream that is not StreamKind::Caller. A device backend runs it
  // when the stream reaches it, and again at every replay when the stream is being captured
  // into a CUDA graph, so the task must be safe to run more than once.
  virtual ncclResult_t enqueue(const StreamRef& s, StreamTask task) = 0;
  // Like enqueue; a backend may start the task right here when the stream is idle (the host
  // backend does, so an op whose peers are ready costs no thread hand-off).
  virtual ncclResult_t enqueueResumable(const StreamRef& s, ResumableTask task) {
    return enqueue(s, [task = std::move(task)] {
      bool done = false;
      return task(-1, &done);
    });
  }
  // Later work on each of `others` waits until everything enqueued on `first` so far is done.
  virtual void orderAfter(const StreamRef& first, const std::vector<StreamRef>& others) = 0;

  // Data calls, queued on `s` in call order. Semantics as in kernels/device.h.
  virtual Fence copy(const StreamRef& s, void* dst, const void* src, size_t bytes, bool streaming) = 0;
  virtual Fence reduce2(const StreamRef& s, ncclDataType_t type, RedKind op, void* dst, const void* a,
                        const void* b, size_t count) = 0;
  virtual Fence scale(const StreamRef& s, ncclDataType_t type, void* dst, const void* src, const void* scalar,
                      size_t count) = 0;
  virtual Fence divide(const StreamRef& s, ncclDataType_t type, void* dst, const void* src, int divisor,
                       size_t count) = 0;
  // True once `f` has completed.
  virtual bool poll(Fence f) = 0;
  // Blocks until one of `fences` completes or `timeoutUsec` passes.
  virtual void waitAny(const std::vector<Fence>& fences, int64_t timeoutUsec) = 0;
  // True once a data call failed on the device (the fences of a failed backend all read as
  // complete, so nothing waits forever; the executor fails the work instead).
  virtual bool failed() const { return false; }

  // The communicator is going away (ncclCommDestroy/Finalize): returns once every task
  // enqueued so far has run. Device tasks run when their stream reaches them.
  virtual void drain() {}
  // After drain (destroy) or instead of it (abort): stops the backend's threads. With
  // `abort`, tasks whose stream never reached them are dropped and their streams released.
  virtual void shutdown(bool abort) { (void)abort; }
};

// The backend of this process: host or CUDA. Chosen once, at first use (backend_choice.cc),
// which logs one INFO line saying which and why; processBackendWhy() is that line.
std::shared_ptr<Backend> processBackend();
// The backend for a communicator created now on this thread: the host backend, or a CUDA
// backend bound to the current CUDA device (NCCL binds a communicator to the device current
// at ncclCommInitRank), whose number is returned in *cudaDev (-1 for host).
ncclResult_t backendForNewComm(std::shared_ptr<Backend>* out, int* cudaDev);
bool processUsesCuda();
const std::string& processBackendWhy();
std::shared_ptr<Backend> hostBackend();

}  // namespace accl::dev
