// internal.h: what the files of the fake CUDA driver (build/tests/fake_cuda/libcuda.so.1) share.
// The fake runs the driver API on the host so the CUDA backend is tested without a GPU:
// device memory is a PROT_NONE view of a memfd (the CPU faults on it, as it would on HBM) that
// the fake's own engine reaches through a second, writable view of the same memfd; streams are
// in-order queues run by one worker thread each; kernels are the host kernels of kernels/host.
// Entry points are the real names with cuda.h's types (the driver's C ABI).
#pragma once
#include <cuda.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <deque>
#include <vector>

// Exported with C linkage whatever the build's default visibility.
#define FAKE_CUDA_API extern "C" __attribute__((visibility("default")))

namespace fakecuda {

// ---- errors.cc ----
const char* errorName(CUresult r);    // "CUDA_ERROR_INVALID_VALUE"
const char* errorString(CUresult r);  // "invalid argument"
// One line on stderr, prefixed "fake libcuda: " (what the real GPU would show as a fault or an
// Xid; tests read it).
void report(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// The same, only when FAKE_CUDA_TRACE is set: what each stream runs, for debugging a backend.
bool tracing();
#define FAKE_CUDA_TRACE(...) \
  do {                       \
    if (::fakecuda::tracing()) ::fakecuda::report(__VA_ARGS__); \
  } while (0)

// ---- devices.cc: devices, primary contexts, the thread's current context ----
struct Context {
  int device = 0;
  int retains = 0;  // primary context reference count (guarded by the device table's lock)
};
bool initialized();                // cuInit ran
int deviceCount();                 // FAKE_CUDA_DEVICES, default 1
Context* primaryContext(int device);  // the one context of each device (never freed)
bool isContext(CUcontext c);
inline Context* asContext(CUcontext c) { return reinterpret_cast<Context*>(c); }
inline CUcontext asHandle(Context* c) { return reinterpret_cast<CUcontext>(c); }
// The calling thread's context: CUDA_ERROR_NOT_INITIALIZED before cuInit,
// CUDA_ERROR_INVALID_CONTEXT when none is current (what the real driver answers).
CUresult currentContext(Context** out);

// ---- memory.cc: the device arena, host ranges, address translation ----
enum class MemKind { None, Device, Imported, HostAlloc, HostRegistered };
// One exported allocation's state, in memory shared by the exporting process and the processes
// that opened it (ipc.cc): an importer's access after the exporter freed it faults, and the
// exporter's cuMemFree says when others still have it open.
struct ExportSlot {
  std::atomic<uint32_t> alive;  // 1 until the exporter frees the allocation
  std::atomic<int32_t> opens;   // processes that have it open now
};
// Bytes of host memory registered now (cuMemHostRegister, not yet unregistered).
size_t registeredHostBytes();
// cuMemFree calls of an exported allocation that another process still had open.
unsigned long long freesWhileOpen();
struct Range {
  MemKind kind = MemKind::None;
  uintptr_t base = 0;  // the address the program sees
  size_t size = 0;
  char* shadow = nullptr;  // where the engine reaches base (== base for host memory)
  Context* ctx = nullptr;
  // For device memory: the memfd and the offset of base in it (IPC handles name them).
  int fd = -1;
  size_t fdOffset = 0;
  size_t mapped = 0;  // bytes reserved or mapped for it (whole pages)
  bool streamOrdered = false;  // from cuMemAllocAsync: cuMemFree does not synchronize
  // Host memory the device may reach: cuMemHostAlloc'd (always, with unified addressing), or
  // registered with CU_MEMHOSTREGISTER_DEVICEMAP.
  bool deviceMapped = false;
  // Device memory exported with cuIpcGetMemHandle, or memory imported with cuIpcOpenMemHandle.
  ExportSlot* exportSlot = nullptr;
};
CUresult deviceAlloc(Context* ctx, size_t bytes, bool streamOrdered, uintptr_t* out);
CUresult deviceFree(uintptr_t base);  // base of a cuMemAlloc'd (not imported) allocation
// Maps size bytes at fdOffset of `fd` as device memory (IPC import); takes ownership of fd.
CUresult importRange(Context* ctx, int fd, size_t fdOffset, size_t size, ExportSlot* slot, uintptr_t* out);
void setExportSlot(uintptr_t base, ExportSlot* slot);  // on the device allocation at base
CUresult unimportRange(uintptr_t base);
size_t deviceMemoryBytes();  // the arena's size (FAKE_CUDA_MEMORY_GIB)
size_t deviceMemoryUsed();   // bytes allocated now, IPC imports not counted
CUresult hostAlloc(Context* ctx, size_t bytes, void** out);
CUresult hostFree(void* p);
CUresult hostRegister(Context* ctx, void* p, size_t bytes, bool deviceMapped);
CUresult hostUnregister(void* p);
// The range that contains addr (any kind), or kind None.
Range findRange(uintptr_t addr);
// Where a kernel or memory operation reads/writes [addr, addr+bytes): device memory through its
// shadow, device-mapped host memory (cuMemHostAlloc'd, or registered with DEVICEMAP) as is;
// nullptr for anything else (the "illegal address" a GPU would fault on), with a stderr line
// when it is host memory registered without DEVICEMAP.
char* kernelAddress(uintptr_t addr, size_t bytes);
// Where a memcpy reads/writes: like kernelAddress, but any other address is pageable host
// memory (memcpy may use it). nullptr when [addr, addr+bytes) starts in device memory and runs
// past its allocation.
char* copyAddress(uintptr_t addr, size_t bytes);

// ---- events.cc: completion markers and events ----
// One record of an event: done once the stream reaches it.
class Marker {
 public:
  void complete(CUresult result);
  bool done();
  CUresult wait();  // blocks until done; the stream's error at that point
  bool waitFor(int ms);  // wait() for at most ms milliseconds; whether done
  double doneAtMs();  // when it completed (steady clock, ms); valid once done
 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  CUresult result_ = CUDA_SUCCESS;
  double doneAtMs_ = 0;
};
struct Graph;
struct Event {
  Context* ctx = nullptr;
  unsigned flags = 0;
  std::mutex mu;
  std::shared_ptr<Marker> last;  // the latest record; null before the first
  std::shared_ptr<Graph> capturedIn;  // the last record was captured into this graph
  int capturedId = 0;                 // ... as this Record node
};

// ---- hw_queues.cc: hardware queues shared by a context's streams (CUDA_DEVICE_MAX_CONNECTIONS) ----
struct HwQueue {
  int index = 0, of = 0;  // queue `index` of the context's `of`
  // An operation takes a ticket when queued (under its stream's lock, so a stream's tickets
  // follow its order) and waits its turn before it runs; it releases the queue once started.
  uint64_t ticket(const void* stream);
  void awaitTurn(uint64_t ticket, const void* stream);  // says on stderr when held for long
  void release();

 private:
  std::mutex mu;
  std::condition_variable cv;
  uint64_t issued = 0, started = 0;
  std::deque<const void*> owners;  // the stream of each ticket not yet started, in order
};
// The queue of the next stream of ctx (the default stream is number 0); null ctx: none.
HwQueue* assignHwQueue(Context* ctx, bool defaultStream);
// Called by a stream's worker around each operation: the operation holds q until it has
// started, which is when it ends unless it calls operationStarted() first (a kernel does, as
// it begins: a running kernel does not hold the queue).
void beginRunning(HwQueue* q);
void operationStarted();
void endRunning();

// ---- streams.cc ----
// An operation on a stream. It receives the stream's sticky error (CUDA_SUCCESS when none) and
// returns the stream's error afterwards; work ops do nothing once the stream has failed,
// markers complete either way (so waiters never hang on a dead stream).
using Op = std::function<CUresult(CUresult sticky)>;
Op work(std::function<CUresult()> body);
class Stream {
 public:
  // `legacy`: the context's legacy default stream (NULL, CU_STREAM_LEGACY).
  Stream(Context* ctx, unsigned flags, bool legacy = false);
  ~Stream();
  // Finishes the queue and stops the worker; the object stays valid (see destroyStream).
  void retire();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  // Queues op, or records it when the stream is capturing.
  void enqueue(Op op);
  // Queues ops with nothing of another thread in between (a graph launch).
  void enqueueAll(const std::vector<Op>& ops);
  CUresult synchronize();
  // Waits for the work queued so far (a capturing stream has none: its work is recorded).
  CUresult drain();
  // drain() until `deadline`; whether the work queued so far is done by then.
  bool drainUntil(std::chrono::steady_clock::time_point deadline);
  CUresult query();  // CUDA_SUCCESS, CUDA_ERROR_NOT_READY or the sticky error
  Context* ctx() const { return ctx_; }
  unsigned flags() const { return flags_; }
  bool legacy() const { return legacy_; }
  // cuStreamGetId: unique in the process, never reused (handles may be).
  unsigned long long id() const { return id_; }
  bool blocking() const { return (flags_ & CU_STREAM_NON_BLOCKING) == 0; }
  // The graph this stream is capturing into (its own capture, or one it joined by waiting on
  // an event recorded in it); null when not capturing.
  std::shared_ptr<Graph> captureGraph();
  CUstreamCaptureStatus captureStatus();
  std::mutex captureMu;
  std::shared_ptr<Graph> capture;  // guarded by captureMu

 private:
  void run();
  // Queues ops as they are (no capture, no implicit synchronization).
  void append(const std::vector<Op>& ops);
  bool idle();
  // A marker this stream completes once it has run everything queued before it.
  std::shared_ptr<Marker> markNow();
  // The legacy default stream's implicit synchronization, as waits to put before new work:
  // the legacy stream waits for all blocking streams of its context, a blocking stream for
  // the legacy stream; non-blocking streams neither.
  std::vector<Op> implicitWaits();
  struct Queued {
    Op op;
    uint64_t ticket = 0;  // on hwq_
  };
  Context* ctx_;
  unsigned flags_;
  bool legacy_;
  unsigned long long id_;
  HwQueue* hwq_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  uint64_t enqueued_ = 0, done_ = 0;
  CUresult sticky_ = CUDA_SUCCESS;
  bool stop_ = false;
  std::thread worker_;  // last: starts once the rest is built
};
// The stream a handle names (needs a current context for the special handles): 0 and
// CU_STREAM_LEGACY the legacy default stream of the current context's device,
// CU_STREAM_PER_THREAD this thread's own default stream of that context (a blocking stream,
// made on first use); others must be live streams (INVALID_HANDLE).
CUresult resolveStream(CUstream h, Stream** out);
CUresult createStream(Context* ctx, unsigned flags, Stream** out);
CUresult destroyStream(CUstream h);  // pending work still runs, as with the real driver
CUresult synchronizeContext(Context* ctx);  // cuCtxSynchronize: a capturing stream invalidates its capture
void drainContext(Context* ctx);  // what cuMemFree waits for: queued work, captures left alone
// drainContext for at most `ms` milliseconds: a stream of ctx still busy then, or null.
Stream* drainContextFor(Context* ctx, int ms);

// ---- module_loading.cc: CUDA_MODULE_LOADING (LAZY by default since CUDA 12.2) ----
// Called by cuModuleGetFunction for a kernel it found: under lazy loading, the first lookup of
// each kernel in a context loads it, which synchronizes the context. A stream still busy after
// a bounded wait is reported (kernel and stream named) and the lookup fails instead of hanging.
CUresult loadFunction(Context* ctx, const char* name);
CUresult resolveEvent(CUevent h, Event** out);

// ---- capture.cc ----
// A captured operation: work, or an event record/wait inside the capture (an edge between
// branches, given fresh markers at each launch so replays stay ordered).
struct Node {
  enum Kind { Work, Record, Wait } kind = Work;
  Op op;       // Work
  int id = 0;  // Record/Wait: which record
};
// One branch per stream in the capture (streams join by waiting on an event recorded in it:
// fork/join). A launch runs the branches concurrently, as the GPU would: branches may wait on
// each other through memory as well as through events.
struct Graph {
  std::mutex mu;
  std::vector<Stream*> members;              // guarded by mu; members[0] began the capture
  std::vector<std::vector<Node>> branches;   // guarded by mu; branches[i] recorded from members[i]
  int records = 0;                           // guarded by mu; Record ids handed out
  std::vector<std::shared_ptr<Marker>> eventMarkers;  // completed when the capture ends
  std::atomic<bool> open{true};              // still being captured
  std::atomic<bool> invalidated{false};
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;  // as given to cuStreamBeginCapture
  std::thread::id owner;                     // the thread that began it
};
// Ops enqueued on a capturing stream land in its graph instead of running.
bool captureIfActive(Stream* s, const std::vector<Op>& ops);
// cuEventRecord on capturing stream s: a Record node; returns its id.
int captureRecord(Stream* s, const std::shared_ptr<Graph>& g, const std::shared_ptr<Marker>& eventMarker);
// cuStreamWaitEvent on s for record `id` of capture g: s joins g when it is not in it yet.
void captureWait(Stream* s, const std::shared_ptr<Graph>& g, int id);

// ---- capture_modes.cc: which calls a capture forbids, and on which threads ----
// Every capture that has begun and not ended (cuStreamBeginCapture / cuStreamEndCapture).
void captureBegan(const std::shared_ptr<Graph>& g);
void captureEnded(const Graph* g);
// For a "potentially unsafe" call (allocation, registration, IPC mapping, module loading,
// context synchronization): CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED when the calling thread's
// capture mode and the captures under way forbid it, after invalidating the captures that
// forbid it and writing a stderr line naming the call; CUDA_SUCCESS otherwise.
CUresult refuseIfCaptureForbids(const char* call);

// ---- registries of live handles: a stale or foreign handle is an error, not a crash ----
template <class T>
class Registry {
 public:
  void add(T* p) {
    std::lock_guard<std::mutex> g(mu_);
    live_.insert(p);
  }
  bool remove(T* p) {
    std::lock_guard<std::mutex> g(mu_);
    return live_.erase(p) > 0;
  }
  bool contains(const void* p) {
    std::lock_guard<std::mutex> g(mu_);
    return live_.count(static_cast<T*>(const_cast<void*>(p))) > 0;
  }
  std::vector<T*> snapshot() {
    std::lock_guard<std::mutex> g(mu_);
    return {live_.begin(), live_.end()};
  }

 private:
  std::mutex mu_;
  std::unordered_set<T*> live_;
};
Registry<Stream>& streams();
Registry<Event>& events();

// ---- counters for test programs (test_hooks.cc) ----
void countKernel(const char* name);
void countMemop();
void countFunctionLookup();  // cuModuleGetFunction calls
void countMemcpy();
// ---- call_log.cc: the call log of fake_cuda_test_api.h ----
void noteCall(const char* entry);  // at the start of every entry point
void noteQueued(int kind);         // FAKE_CUDA_QUEUED_* but launches and copies
void noteLaunch(const char* kernel, const unsigned grid[3], const unsigned block[3], size_t argBytes);
void noteCopy(uintptr_t dst, uintptr_t src, size_t bytes, bool async);

}  // namespace fakecuda
