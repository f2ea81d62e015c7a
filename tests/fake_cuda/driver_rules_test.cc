// The rules of the real CUDA driver that the fake enforces so the CUDA backend cannot break
// them unseen (issue 23, item 4): what a stream capture forbids on which thread, hardware
// queues shared by streams (CUDA_DEVICE_MAX_CONNECTIONS), the legacy default stream's implicit
// synchronization, device access to host memory, lazy module loading, IPC mappings.
// Like fake_cuda_test, this program also runs on a REAL driver (docs/fake-cuda.md): there a
// failure means the fake (or the documentation it follows) is wrong; checks that only the fake
// can answer (its stderr lines, its queue mapping) are skipped.
#include <cstdint>
#include <cuda.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include "fake_cuda/fake_cuda_fixture.h"

extern char** environ;

namespace {

// ---- scenarios that need a setting the driver reads once per process ----
// CUDA_DEVICE_MAX_CONNECTIONS and CUDA_MODULE_LOADING are read when the driver starts: a test
// runs this program again with the setting and FAKE_RULES_CHILD=<scenario>; the child runs the
// scenario before main() and exits with its verdict.
constexpr int kRan = 0, kHeld = 3, kBroken = 2;

bool childInit(CUcontext* ctx) {
  CUdevice dev = 0;
  return cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
         cuDevicePrimaryCtxRetain(ctx, dev) == CUDA_SUCCESS && cuCtxSetCurrent(*ctx) == CUDA_SUCCESS;
}

// Stream A waits for a flag (a stream memory wait, or a spinning kernel); stream B, created
// `gap` streams after A, then writes a word. kRan when B's write lands while A still waits,
// kHeld when it has not within 2 s; A is then released from the host either way.
int waitThenWrite(bool kernel, int gap) {
  CUcontext ctx = nullptr;
  void* host = nullptr;
  CUdeviceptr flag = 0;
  if (!childInit(&ctx) || cuMemHostAlloc(&host, 16, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) ||
      cuMemHostGetDevicePointer(&flag, host, 0))
    return kBroken;
  auto* words = static_cast<uint64_t*>(host);
  words[0] = words[1] = 0;
  CUstream a = nullptr, b = nullptr;
  std::vector<CUstream> between(gap);
  if (cuStreamCreate(&a, CU_STREAM_NON_BLOCKING)) return kBroken;
  for (CUstream& s : between)
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) return kBroken;
  if (cuStreamCreate(&b, CU_STREAM_NON_BLOCKING)) return kBroken;
  if (kernel) {
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    unsigned long long want = 1;
    int equal = 0;
    void* params[] = {&flag, &want, &equal};
    if (cuModuleLoadData(&m, kernelImage().data()) || cuModuleGetFunction(&f, m, "accl_wait_flag") ||
        cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, a, params, nullptr))
      return kBroken;
  } else if (cuStreamWaitValue64(a, flag, 1, CU_STREAM_WAIT_VALUE_GEQ)) {
    return kBroken;
  }
  if (cuStreamWriteValue64(b, flag + 8, 1, 0)) return kBroken;
  bool ran = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!ran && std::chrono::steady_clock::now() < deadline) {
    ran = __atomic_load_n(&words[1], __ATOMIC_ACQUIRE) == 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  __atomic_store_n(&words[0], 1, __ATOMIC_RELEASE);  // releases A (and then B, if it was held)
  if (cuStreamSynchronize(a) || cuStreamSynchronize(b)) return kBroken;
  return ran ? kRan : kHeld;
}

// Looks a kernel up while a stream waits for this thread (to be released 3 s later by another
// thread). kRan when the lookup returned at once; kHeld when it waited for the stream or
// failed (what lazy loading's context synchronization does). A kernel looked up before, while
// the context was idle, must come back at once either way.
int lookupWhileAStreamWaits() {
  CUcontext ctx = nullptr;
  void* host = nullptr;
  CUdeviceptr flag = 0;
  CUmodule m = nullptr;
  CUfunction f = nullptr;
  CUstream a = nullptr;
  if (!childInit(&ctx) || cuMemHostAlloc(&host, 8, CU_MEMHOSTALLOC_DEVICEMAP) ||
      cuMemHostGetDevicePointer(&flag, host, 0) || cuStreamCreate(&a, CU_STREAM_NON_BLOCKING) ||
      cuModuleLoadData(&m, kernelImage().data()) || cuModuleGetFunction(&f, m, "accl_copy"))
    return kBroken;
  auto* word = static_cast<uint64_t*>(host);
  *word = 0;
  if (cuStreamWaitValue64(a, flag, 1, CU_STREAM_WAIT_VALUE_GEQ)) return kBroken;
  std::thread release([word] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    __atomic_store_n(word, 1, __ATOMIC_RELEASE);
  });
  auto t0 = std::chrono::steady_clock::now();
  const CUresult again = cuModuleGetFunction(&f, m, "accl_copy");
  const bool againPrompt = std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1000);
  t0 = std::chrono::steady_clock::now();
  const CUresult first = cuModuleGetFunction(&f, m, "accl_write_flag");
  const bool firstPrompt = std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1000);
  release.join();
  fprintf(stderr, "lookup of a kernel seen before: %d (%s); first lookup of another: %d (%s)\n", again,
          againPrompt ? "at once" : "slow", first, firstPrompt ? "at once" : "slow");
  if (cuStreamSynchronize(a) || again != CUDA_SUCCESS || !againPrompt) return kBroken;
  return first == CUDA_SUCCESS && firstPrompt ? kRan : kHeld;
}

// The other process of the IPC rules: opens the handle in FAKE_RULES_HANDLE (hex), checks the
// bytes read 0x5A, says "opened" on stdout, waits for a byte on stdin (the exporter frees the
// memory meanwhile), then runs a kernel reading it. 0 when that kernel faulted, 1 when it ran.
int importerAfterFree() {
  CUcontext ctx = nullptr;
  const char* hex = std::getenv("FAKE_RULES_HANDLE");
  CUipcMemHandle handle;
  if (!childInit(&ctx) || hex == nullptr || std::strlen(hex) != 2 * sizeof handle) return kBroken;
  for (size_t i = 0; i < sizeof handle; i++) {
    unsigned v = 0;
    sscanf(hex + 2 * i, "%2x", &v);
    handle.reserved[i] = static_cast<char>(v);
  }
  CUdeviceptr theirs = 0, mine = 0;
  CUstream s = nullptr;
  CUmodule m = nullptr;
  CUfunction copy = nullptr;
  unsigned char seen[16] = {};
  if (cuIpcOpenMemHandle(&theirs, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) || cuMemAlloc(&mine, 4096) ||
      cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuModuleLoadData(&m, kernelImage().data()) ||
      cuModuleGetFunction(&copy, m, "accl_copy") || cuMemcpyDtoH(seen, theirs, sizeof seen) || seen[0] != 0x5A)
    return kBroken;
  printf("opened\n");
  fflush(stdout);
  char go = 0;
  if (read(0, &go, 1) != 1) return kBroken;
  size_t bytes = 4096;
  void* params[] = {&mine, &theirs, &bytes};
  if (cuLaunchKernel(copy, 1, 1, 1, 128, 1, 1, 0, s, params, nullptr)) return kBroken;
  const CUresult r = cuStreamSynchronize(s);
  fprintf(stderr, "importer: kernel after the exporter's free: %d\n", r);
  return r == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 1;
}

int runScenario(const std::string& name) {
  if (name == "ipc-importer-after-free") return importerAfterFree();
  if (name == "lookup-while-a-stream-waits") return lookupWhileAStreamWaits();
  if (name == "memop-wait") return waitThenWrite(false, 0);
  if (name == "memop-wait-gap7") return waitThenWrite(false, 7);
  if (name == "memop-wait-gap6") return waitThenWrite(false, 6);
  if (name == "kernel-wait") return waitThenWrite(true, 0);
  fprintf(stderr, "unknown scenario %s\n", name.c_str());
  return kBroken;
}

const int kChildScenario = [] {
  if (const char* name = std::getenv("FAKE_RULES_CHILD")) {
    const int verdict = runScenario(name);
    fflush(nullptr);
    _exit(verdict);
  }
  return 0;
}();

// A child running `scenario` with `settings` ("NAME=value") added to the environment and
// CUDA_DEVICE_MAX_CONNECTIONS / CUDA_MODULE_LOADING otherwise unset. Its stdin and stdout are
// pipes (toChild, fromChild); its stderr goes to a file that wait() reads back.
class Child {
 public:
  Child(const std::string& scenario, std::vector<std::string> settings) {
    std::vector<std::string> env;
    for (char** e = environ; *e; e++) {
      const std::string kv = *e;
      if (kv.rfind("CUDA_DEVICE_MAX_CONNECTIONS=", 0) == 0 || kv.rfind("CUDA_MODULE_LOADING=", 0) == 0 ||
          kv.rfind("FAKE_RULES_CHILD=", 0) == 0)
        continue;
      env.push_back(kv);
    }
    for (auto& s : settings) env.push_back(s);
    env.push_back("FAKE_RULES_CHILD=" + scenario);
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return;
    errFd_ = mkstemp(errPath_);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    if (errFd_ >= 0) posix_spawn_file_actions_adddup2(&actions, errFd_, 2);
    char exe[] = "/proc/self/exe";
    char* argv[] = {exe, nullptr};
    if (posix_spawn(&pid_, exe, &actions, nullptr, argv, envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    toChild = in[1];
    fromChild = out[0];
  }
  ~Child() {
    if (toChild >= 0) close(toChild);
    if (fromChild >= 0) close(fromChild);
    if (errFd_ >= 0) {
      close(errFd_);
      unlink(errPath_);
    }
  }
  // Its exit code (-1 when it did not exit); its stderr into *err when given.
  int wait(std::string* err = nullptr) {
    int status = 0;
    const bool exited = pid_ > 0 && waitpid(pid_, &status, 0) == pid_ && WIFEXITED(status);
    if (err && errFd_ >= 0) {
      std::ifstream in(errPath_);
      err->assign(std::istreambuf_iterator<char>(in), {});
    }
    return exited ? WEXITSTATUS(status) : -1;
  }
  int toChild = -1, fromChild = -1;

 private:
  pid_t pid_ = -1;
  char errPath_[40] = "/tmp/fake_cuda_rules_child_XXXXXX";
  int errFd_ = -1;
};

int runChild(const std::string& scenario, std::vector<std::string> settings, std::string* err = nullptr) {
  Child child(scenario, std::move(settings));
  return child.wait(err);
}

using DriverRules = FakeCuda;

// Runs body on a new thread with ctx current (the way another thread of a program, or ACCL's
// own threads, call the driver).
template <class F>
void onOtherThread(CUcontext ctx, F body) {
  std::thread([&] {
    ASSERT_EQ(CUDA_SUCCESS, cuCtxSetCurrent(ctx));
    body();
  }).join();
}

CUstreamCaptureStatus captureStatus(CUstream s) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  EXPECT_EQ(CUDA_SUCCESS, cuStreamIsCapturing(s, &status));
  return status;
}

// ---- rule 1: stream capture modes ----

TEST_F(DriverRules, GlobalCaptureRefusesAllocationOnAnotherThreadAndIsInvalidated) {
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  std::string err;
  onOtherThread(ctx_, [&] {
    CUdeviceptr p = 0;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemAlloc(&p, 256));
    err = ::testing::internal::GetCapturedStderr();
  });
  if (onFake()) {
    EXPECT_NE(std::string::npos, err.find("cuMemAlloc during a global-mode stream capture")) << err;
  }
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_INVALIDATED, captureStatus(stream_));
  CUgraph graph = reinterpret_cast<CUgraph>(1);
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
  EXPECT_EQ(nullptr, graph);
}

TEST_F(DriverRules, GlobalCaptureRefusesHostAllocationRegistrationAndModulesOnItsOwnThread) {
  std::vector<char> pageable(4096);
  void* pinned = nullptr;
  CU_OK(cuMemHostAlloc(&pinned, 64, 0));
  auto refused = [&](const char* what, auto call) {
    CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, call()) << what;
    CUgraph graph = nullptr;
    EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph)) << what;
  };
  void* host = nullptr;
  CUmodule module = nullptr;
  ::testing::internal::CaptureStderr();
  refused("cuMemHostAlloc", [&] { return cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_DEVICEMAP); });
  refused("cuMemHostRegister", [&] { return cuMemHostRegister(pageable.data(), pageable.size(), CU_MEMHOSTREGISTER_DEVICEMAP); });
  refused("cuMemFreeHost", [&] { return cuMemFreeHost(pinned); });
  refused("cuModuleLoadData", [&] { return cuModuleLoadData(&module, kernelImage().data()); });
  ::testing::internal::GetCapturedStderr();
  CU_OK(cuMemFreeHost(pinned));  // outside the capture: fine
}

TEST_F(DriverRules, RelaxedThreadMayAllocateDuringAGlobalCapture) {
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  onOtherThread(ctx_, [&] {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    EXPECT_EQ(CUDA_SUCCESS, cuThreadExchangeStreamCaptureMode(&mode));
    EXPECT_EQ(CU_STREAM_CAPTURE_MODE_GLOBAL, mode);  // a new thread starts in global mode
    CUdeviceptr p = 0;
    void* host = nullptr;
    std::vector<char> pageable(4096);
    EXPECT_EQ(CUDA_SUCCESS, cuMemAlloc(&p, 256));
    EXPECT_EQ(CUDA_SUCCESS, cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_DEVICEMAP));
    EXPECT_EQ(CUDA_SUCCESS, cuMemHostRegister(pageable.data(), pageable.size(), CU_MEMHOSTREGISTER_DEVICEMAP));
    EXPECT_EQ(CUDA_SUCCESS, cuMemHostUnregister(pageable.data()));
    EXPECT_EQ(CUDA_SUCCESS, cuMemFreeHost(host));
    EXPECT_EQ(CUDA_SUCCESS, cuMemFree(p));
    EXPECT_EQ(CUDA_SUCCESS, cuThreadExchangeStreamCaptureMode(&mode));  // push-pop
    EXPECT_EQ(CU_STREAM_CAPTURE_MODE_RELAXED, mode);
  });
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, captureStatus(stream_));
  CUgraph graph = nullptr;
  CU_OK(cuStreamEndCapture(stream_, &graph));
  ASSERT_NE(nullptr, graph);
  CU_OK(cuGraphDestroy(graph));
}

TEST_F(DriverRules, ThreadLocalCaptureRefusesOnlyItsOwnThread) {
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  onOtherThread(ctx_, [&] {
    CUdeviceptr p = 0;  // this thread is in global mode, but the capture is not global
    EXPECT_EQ(CUDA_SUCCESS, cuMemAlloc(&p, 256));
    EXPECT_EQ(CUDA_SUCCESS, cuMemFree(p));
  });
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, captureStatus(stream_));
  CUdeviceptr p = 0;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemAlloc(&p, 256));
  ::testing::internal::GetCapturedStderr();
  CUgraph graph = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
}

TEST_F(DriverRules, RelaxedCaptureForbidsNothing) {
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED));
  CUdeviceptr p = 0, q = 0;
  CU_OK(cuMemAlloc(&p, 256));
  onOtherThread(ctx_, [&] { EXPECT_EQ(CUDA_SUCCESS, cuMemAlloc(&q, 256)); });
  CU_OK(cuMemFree(p));
  CU_OK(cuMemFree(q));
  CUgraph graph = nullptr;
  CU_OK(cuStreamEndCapture(stream_, &graph));
  CU_OK(cuGraphDestroy(graph));
}

TEST_F(DriverRules, CaptureNotRelaxedEndsOnlyOnTheThreadThatBeganIt) {
  CUgraph graph = nullptr;
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ::testing::internal::CaptureStderr();
  onOtherThread(ctx_, [&] { EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, cuStreamEndCapture(stream_, &graph)); });
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, captureStatus(stream_));
  CU_OK(cuStreamEndCapture(stream_, &graph));
  CU_OK(cuGraphDestroy(graph));
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED));
  onOtherThread(ctx_, [&] { EXPECT_EQ(CUDA_SUCCESS, cuStreamEndCapture(stream_, &graph)); });
  CU_OK(cuGraphDestroy(graph));
}

// ---- rule 2: hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) ----

TEST_F(DriverRules, OneHardwareQueueHoldsEveryStreamBehindAnUnsatisfiedWait) {
  // What Megatron-LM and Transformer Engine set: a stream waiting for work queued later on
  // another stream never sees it.
  EXPECT_EQ(kHeld, runChild("memop-wait", {"CUDA_DEVICE_MAX_CONNECTIONS=1"}));
}

TEST_F(DriverRules, StreamsOnTheirOwnHardwareQueuesDoNotHoldEachOther) {
  EXPECT_EQ(kRan, runChild("memop-wait", {}));
  EXPECT_EQ(kRan, runChild("memop-wait", {"CUDA_DEVICE_MAX_CONNECTIONS=2"}));
}

TEST_F(DriverRules, ARunningKernelDoesNotHoldItsHardwareQueue) {
  EXPECT_EQ(kRan, runChild("kernel-wait", {"CUDA_DEVICE_MAX_CONNECTIONS=1"}));
}

TEST_F(DriverRules, StreamsBeyondTheConnectionCountShareHardwareQueues) {
  NEEDS_FAKE();  // the fake's mapping (stream i of a context -> queue i % N); the driver's is its own
  EXPECT_EQ(kHeld, runChild("memop-wait-gap7", {}));  // the 1st and 9th created streams share a queue
  EXPECT_EQ(kRan, runChild("memop-wait-gap6", {}));
  EXPECT_EQ(kHeld, runChild("memop-wait-gap7", {"CUDA_DEVICE_MAX_CONNECTIONS=4"}));
}

// ---- rule 7: the legacy default stream's implicit synchronization ----

// Words in pinned, device-mapped host memory that streams wait on and write (stream memory
// operations: the GPU's front end runs them, no host callback thread involved).
class Words {
 public:
  Words() {
    EXPECT_EQ(CUDA_SUCCESS, cuMemHostAlloc(&host_, 8 * kCount, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    EXPECT_EQ(CUDA_SUCCESS, cuMemHostGetDevicePointer(&dev_, host_, 0));
    for (int i = 0; i < kCount; i++) set(i, 0);
  }
  ~Words() { cuMemFreeHost(host_); }
  void set(int i, uint64_t v) { __atomic_store_n(word(i), v, __ATOMIC_RELEASE); }
  uint64_t get(int i) { return __atomic_load_n(word(i), __ATOMIC_ACQUIRE); }
  // Queued on s: wait until word i >= 1 / write 1 to word i.
  CUresult hold(CUstream s, int i) { return cuStreamWaitValue64(s, dev_ + 8 * i, 1, CU_STREAM_WAIT_VALUE_GEQ); }
  CUresult mark(CUstream s, int i) { return cuStreamWriteValue64(s, dev_ + 8 * i, 1, 0); }
  // Whether word i becomes 1 within `ms` milliseconds.
  bool becomes(int i, int ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (get(i) != 1) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

 private:
  static constexpr int kCount = 8;
  uint64_t* word(int i) { return static_cast<uint64_t*>(host_) + i; }
  void* host_ = nullptr;
  CUdeviceptr dev_ = 0;
};

TEST_F(DriverRules, LegacyStreamWaitsForBlockingStreamsAndTheyForIt) {
  CUstream blocking = nullptr;
  CU_OK(cuStreamCreate(&blocking, 0));
  Words w;
  // The legacy stream waits for earlier work on a blocking stream ...
  CU_OK(w.hold(blocking, 0));
  CU_OK(w.mark(nullptr, 1));
  EXPECT_FALSE(w.becomes(1, 300));
  w.set(0, 1);
  EXPECT_TRUE(w.becomes(1, 5000));
  CU_OK(cuStreamSynchronize(nullptr));
  // ... and later work on a blocking stream waits for earlier work on the legacy stream.
  CU_OK(w.hold(CU_STREAM_LEGACY, 2));
  CU_OK(w.mark(blocking, 3));
  EXPECT_FALSE(w.becomes(3, 300));
  w.set(2, 1);
  EXPECT_TRUE(w.becomes(3, 5000));
  CU_OK(cuStreamSynchronize(blocking));
  CU_OK(cuStreamDestroy(blocking));
}

TEST_F(DriverRules, NonBlockingStreamsDoNotSynchronizeWithTheLegacyStream) {
  Words w;  // stream_ is CU_STREAM_NON_BLOCKING
  CU_OK(w.hold(stream_, 0));
  CU_OK(w.mark(nullptr, 1));
  EXPECT_TRUE(w.becomes(1, 5000));
  CU_OK(w.hold(nullptr, 2));
  CU_OK(w.mark(stream_, 3));  // queued behind stream_'s own wait: released first
  w.set(0, 1);
  EXPECT_TRUE(w.becomes(3, 5000));
  w.set(2, 1);
  CU_OK(cuStreamSynchronize(nullptr));
  CU_OK(cuStreamSynchronize(stream_));
}

TEST_F(DriverRules, PerThreadDefaultStreamIsEachThreadsOwnAndNotTheLegacyOne) {
  Words w;
  CU_OK(w.hold(CU_STREAM_PER_THREAD, 0));  // this thread's per-thread stream is held
  onOtherThread(ctx_, [&] {
    EXPECT_EQ(CUDA_SUCCESS, w.mark(CU_STREAM_PER_THREAD, 1));  // another thread's: not held
    EXPECT_EQ(CUDA_SUCCESS, cuStreamSynchronize(CU_STREAM_PER_THREAD));
  });
  EXPECT_EQ(1u, w.get(1));
  // It is a blocking stream: the legacy stream waits for it.
  CU_OK(w.mark(nullptr, 2));
  EXPECT_FALSE(w.becomes(2, 300));
  w.set(0, 1);
  EXPECT_TRUE(w.becomes(2, 5000));
  CU_OK(cuStreamSynchronize(nullptr));
  CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
}

// ---- rule 6: device access to registered host memory needs CU_MEMHOSTREGISTER_DEVICEMAP ----

TEST_F(DriverRules, KernelsReachRegisteredHostMemoryThroughItsDevicePointer) {
  std::vector<uint8_t> host(4096);
  for (size_t i = 0; i < host.size(); i++) host[i] = static_cast<uint8_t>(i * 7);
  CU_OK(cuMemHostRegister(host.data(), host.size(), CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE));
  CUdeviceptr src = 0, dst = 0;
  CU_OK(cuMemHostGetDevicePointer(&src, host.data(), 0));
  CU_OK(cuMemAlloc(&dst, host.size()));
  size_t bytes = host.size();
  CU_OK(launch(function("accl_copy"), {&dst, &src, &bytes}, stream_));
  CU_OK(cuStreamWriteValue64(stream_, src, 0x1122334455667788ull, 0));  // a memory operation too
  CU_OK(cuStreamSynchronize(stream_));
  std::vector<uint8_t> back(host.size());
  CU_OK(cuMemcpyDtoH(back.data(), dst, back.size()));
  for (size_t i = 0; i < back.size(); i++) ASSERT_EQ(static_cast<uint8_t>(i * 7), back[i]) << i;
  uint64_t first = 0;
  std::memcpy(&first, host.data(), 8);
  EXPECT_EQ(0x1122334455667788ull, first);
  CU_OK(cuMemHostUnregister(host.data()));
  CU_OK(cuMemFree(dst));
}

// The real driver with unified addressing may still reach such memory (the runtime documents
// cudaHostRegisterDefault as mapped there); the driver API maps it only with DEVICEMAP, and a
// backend must not rely on more. The fake holds it to that.
TEST_F(DriverRules, RegisteredHostMemoryWithoutDeviceMapIsNotForTheDevice) {
  NEEDS_FAKE();
  std::vector<uint8_t> host(4096, 3);
  CU_OK(cuMemHostRegister(host.data(), host.size(), CU_MEMHOSTREGISTER_PORTABLE));
  const auto addr = reinterpret_cast<CUdeviceptr>(host.data());
  CUdeviceptr dev = 0, dst = 0;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemHostGetDevicePointer(&dev, host.data(), 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuStreamWriteValue64(stream_, addr, 1, 0));
  CU_OK(cuMemAlloc(&dst, host.size()));
  CU_OK(cuMemcpyHtoDAsync(dst, host.data(), host.size(), stream_));  // copies may use it: it is pinned
  CU_OK(cuStreamSynchronize(stream_));
  size_t bytes = host.size();
  CUdeviceptr src = addr;
  CU_OK(launch(function("accl_copy"), {&dst, &src, &bytes}, stream_));  // accepted: faults when it runs
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(stream_));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(std::string::npos, err.find("registered without CU_MEMHOSTREGISTER_DEVICEMAP")) << err;
  EXPECT_NE(std::string::npos, err.find("kernel accl_copy: illegal address")) << err;
  CU_OK(cuMemHostUnregister(host.data()));
}

// ---- rule 3: lazy module loading synchronizes the context ----

TEST_F(DriverRules, LazyLoadingSynchronizesTheContextAtAKernelsFirstLookup) {
  std::string err;
  const int verdict =
      runChild("lookup-while-a-stream-waits", {"FAKE_CUDA_LAZY_LOAD_TIMEOUT_MS=1000"}, &err);  // LAZY: the default
  if (!onFake()) {
    // The real driver "may" synchronize: what it did is worth knowing, not a failure.
    fprintf(stderr, "real driver, lazy loading: the first lookup %s\n%s", verdict == kHeld ? "waited" : "did not wait",
            err.c_str());
    ASSERT_NE(kBroken, verdict) << err;
    return;
  }
  EXPECT_EQ(kHeld, verdict) << err;
  EXPECT_NE(std::string::npos, err.find("cuModuleGetFunction(accl_write_flag): lazy module loading")) << err;
  EXPECT_NE(std::string::npos, err.find("is still busy after 1000 ms")) << err;
  EXPECT_EQ(kHeld, runChild("lookup-while-a-stream-waits", {"CUDA_MODULE_LOADING=LAZY",
                                                            "FAKE_CUDA_LAZY_LOAD_TIMEOUT_MS=1000"}));
}

TEST_F(DriverRules, EagerLoadingNeverSynchronizesAtLookup) {
  std::string err;
  EXPECT_EQ(kRan, runChild("lookup-while-a-stream-waits", {"CUDA_MODULE_LOADING=EAGER"}, &err)) << err;
}

// ---- rule 5: freeing an exported allocation that another process still has open ----

TEST_F(DriverRules, AnImportersAccessAfterTheExporterFreedItFaults) {
  NEEDS_FAKE();  // undefined behaviour on a GPU: what it does there is not what this checks
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 4096));
  CU_OK(cuMemsetD8(p, 0x5A, 4096));
  CUipcMemHandle handle;
  CU_OK(cuIpcGetMemHandle(&handle, p));
  std::string hex;
  for (size_t i = 0; i < sizeof handle; i++) {
    char two[3];
    snprintf(two, sizeof two, "%02x", static_cast<unsigned char>(handle.reserved[i]));
    hex += two;
  }
  Child child("ipc-importer-after-free", {"FAKE_RULES_HANDLE=" + hex});
  char said[7] = {};
  ASSERT_EQ(6, read(child.fromChild, said, 6)) << "the importer did not open the handle";
  EXPECT_STREQ("opened", said);
  ::testing::internal::CaptureStderr();
  CU_OK(cuMemFree(p));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(std::string::npos, err.find("1 other process(es) still have this allocation open through CUDA IPC")) << err;
  ASSERT_EQ(1, write(child.toChild, "x", 1));
  std::string childErr;
  EXPECT_EQ(0, child.wait(&childErr)) << childErr;
  EXPECT_NE(std::string::npos, childErr.find("the exporting process freed this CUDA IPC allocation")) << childErr;
}

// ---- rule 4: a CUDA IPC handle opens only in another process ----

TEST_F(DriverRules, IpcHandleDoesNotOpenInTheProcessThatMadeIt) {
  CUdeviceptr p = 0, same = 0;
  CU_OK(cuMemAlloc(&p, 4096));
  CUipcMemHandle handle;
  CU_OK(cuIpcGetMemHandle(&handle, p));
  ::testing::internal::CaptureStderr();
  const CUresult here = cuIpcOpenMemHandle(&same, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  CUresult otherThread = CUDA_SUCCESS;
  onOtherThread(ctx_, [&] { otherThread = cuIpcOpenMemHandle(&same, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS); });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(CUDA_SUCCESS, here);
  EXPECT_NE(CUDA_SUCCESS, otherThread);
  if (onFake()) {
    EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, here);
    EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, otherThread);
    EXPECT_NE(std::string::npos, err.find("the handle was exported by this process")) << err;
  }
  CU_OK(cuMemFree(p));
}

}  // namespace
