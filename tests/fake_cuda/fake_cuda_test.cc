// The fake CUDA driver (tests/fake_cuda) against the driver semantics it emulates: devices and
// contexts, memory the CPU cannot touch, stream order, events, memory operations, kernels run
// by the host kernels, copies, faults on unknown host memory, IPC with another process, and
// graph capture with replay.
// The same program checks a REAL driver on a GPU machine (is the fake faithful?): run it with
// LD_LIBRARY_PATH naming the folder of the real libcuda.so.1 (searched before the RUNPATH) and
// ACCL_TEST_BUILD_DIR holding lib/accl_device_kernels.fatbin. What only the fake can answer
// (its hooks, its device's figures, its stderr lines, a second device) is then left out.
#include <algorithm>
#include <cstdint>
#include <cuda.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>
#include "fake_cuda/fake_cuda_fixture.h"
#include "fake_cuda/fake_cuda_test_api.h"

extern char** environ;

namespace {

TEST_F(FakeCuda, DevicesLookLikeSm90PartsWithDistinctIdentities) {
  NEEDS_FAKE();
  int n = 0, v = 0;
  CU_OK(cuDeviceGetCount(&n));
  EXPECT_EQ(2, n);
  CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  EXPECT_EQ(9, v);
  CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  EXPECT_EQ(132, v);
  for (auto a : {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
                 CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS}) {
    CU_OK(cuDeviceGetAttribute(&v, a, 1));
    EXPECT_EQ(1, v) << "attribute " << a;
  }
  char bus0[32], bus1[32];
  CU_OK(cuDeviceGetPCIBusId(bus0, sizeof bus0, 0));
  CU_OK(cuDeviceGetPCIBusId(bus1, sizeof bus1, 1));
  EXPECT_STREQ("0000:00:00.0", bus0);
  EXPECT_STREQ("0000:01:00.0", bus1);
  CUuuid u0, u1, again;
  CU_OK(cuDeviceGetUuid(&u0, 0));
  CU_OK(cuDeviceGetUuid(&u1, 1));
  CU_OK(cuDeviceGetUuid(&again, 0));
  EXPECT_NE(0, std::memcmp(u0.bytes, u1.bytes, 16));
  EXPECT_EQ(0, std::memcmp(u0.bytes, again.bytes, 16));
  EXPECT_EQ(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev_, 2));
  dev_ = 0;
}

TEST_F(FakeCuda, CallsNeedingAContextFailWithoutOne) {
  std::thread([] {
    CUdeviceptr p = 0;
    CUdevice d = 0;
    EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&p, 64));
    EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, cuCtxGetDevice(&d));
    EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, cuStreamSynchronize(nullptr));
    CUcontext c = reinterpret_cast<CUcontext>(1);
    EXPECT_EQ(CUDA_SUCCESS, cuCtxGetCurrent(&c));
    EXPECT_EQ(nullptr, c);  // the current context is per thread
  }).join();
  CUdevice d = -1;
  CU_OK(cuCtxGetDevice(&d));
  EXPECT_EQ(0, d);
}

TEST_F(FakeCuda, HostCodeTouchingDeviceMemoryCrashes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 4096));
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  EXPECT_DEATH(*reinterpret_cast<volatile char*>(p + 100) = 1, "SEGV");  // the sanitizer reports the fault
#else
  EXPECT_EXIT(*reinterpret_cast<volatile char*>(p + 100) = 1, ::testing::KilledBySignal(SIGSEGV), "");
#endif
  CU_OK(cuMemFree(p));
}

TEST_F(FakeCuda, PointerAttributesTellDeviceFromHostMemory) {
  CUdeviceptr d = 0;
  CU_OK(cuMemAlloc(&d, 1000));
  unsigned type = 0;
  int ordinal = -1, managed = 7;
  CUcontext owner = nullptr;
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 10));
  EXPECT_EQ(unsigned{CU_MEMORYTYPE_DEVICE}, type);
  CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d));
  EXPECT_EQ(0, ordinal);
  CU_OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, d));
  EXPECT_EQ(ctx_, owner);
  managed = 0;
  CU_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
  EXPECT_EQ(0, managed);
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_OK(cuMemGetAddressRange(&base, &size, d + 999));
  EXPECT_EQ(d, base);
  EXPECT_EQ(1000u, size);

  void* pinned = nullptr;
  CU_OK(cuMemHostAlloc(&pinned, 256, CU_MEMHOSTALLOC_DEVICEMAP));
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(pinned)));
  EXPECT_EQ(unsigned{CU_MEMORYTYPE_HOST}, type);
  std::vector<char> pageable(512);
  const auto pageableAddr = reinterpret_cast<CUdeviceptr>(pageable.data());
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pageableAddr));
  CU_OK(cuMemHostRegister(pageable.data(), pageable.size(), CU_MEMHOSTREGISTER_DEVICEMAP));
  EXPECT_EQ(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, cuMemHostRegister(pageable.data() + 8, 8, 0));
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pageableAddr + 5));
  EXPECT_EQ(unsigned{CU_MEMORYTYPE_HOST}, type);
  CUdeviceptr mapped = 0;
  CU_OK(cuMemHostGetDevicePointer(&mapped, pageable.data(), 0));
  EXPECT_EQ(pageableAddr, mapped);
  CU_OK(cuMemHostUnregister(pageable.data()));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pageableAddr));
  EXPECT_EQ(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister(pageable.data()));

  CU_OK(cuMemFreeHost(pinned));
  CU_OK(cuMemFree(d));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemFree(d));
  NEEDS_TWO_DEVICES();
  // Memory of the second device says so.
  CUcontext ctx1 = nullptr;
  CUdeviceptr d1 = 0;
  CU_OK(cuDevicePrimaryCtxRetain(&ctx1, 1));
  CU_OK(cuCtxSetCurrent(ctx1));
  CU_OK(cuMemAlloc(&d1, 64));
  CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d1));
  EXPECT_EQ(1, ordinal);
  CU_OK(cuMemFree(d1));
  CU_OK(cuCtxSetCurrent(ctx_));
  CU_OK(cuDevicePrimaryCtxRelease(1));
}

TEST_F(FakeCuda, StreamRunsItsWorkInOrderAndQueryTellsWhenDone) {
  Gate gate;
  std::vector<int> order;
  std::vector<std::pair<std::vector<int>*, int>> args;
  for (int i = 0; i < 50; i++) args.push_back({&order, i});
  CU_OK(cuLaunchHostFunc(stream_, Gate::wait, &gate));
  for (auto& a : args) CU_OK(cuLaunchHostFunc(stream_, appendIndex, &a));
  EXPECT_EQ(CUDA_ERROR_NOT_READY, cuStreamQuery(stream_));
  gate.open();
  CU_OK(cuStreamSynchronize(stream_));
  CU_OK(cuStreamQuery(stream_));
  ASSERT_EQ(50u, order.size());
  for (int i = 0; i < 50; i++) EXPECT_EQ(i, order[i]);
  CUcontext owner = nullptr;
  CU_OK(cuStreamGetCtx(stream_, &owner));
  EXPECT_EQ(ctx_, owner);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  CU_OK(cuStreamIsCapturing(stream_, &status));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_NONE, status);
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(reinterpret_cast<CUstream>(&gate)));
}

TEST_F(FakeCuda, StreamWaitEventWaitsForTheRecordCurrentAtTheCall) {
  CUstream other = nullptr, third = nullptr;
  CU_OK(cuStreamCreate(&other, 0));
  CU_OK(cuStreamCreate(&third, 0));
  CUevent e = nullptr, never = nullptr;
  CU_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventCreate(&never, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventQuery(never));  // never recorded: complete
  Gate gate;
  std::atomic<int> ran{0};
  CU_OK(cuLaunchHostFunc(stream_, Gate::wait, &gate));
  CU_OK(cuEventRecord(e, stream_));
  EXPECT_EQ(CUDA_ERROR_NOT_READY, cuEventQuery(e));
  CU_OK(cuStreamWaitEvent(other, never, 0));  // does not block
  CU_OK(cuStreamWaitEvent(other, e, 0));
  CU_OK(cuLaunchHostFunc(other, [](void* p) { static_cast<std::atomic<int>*>(p)->store(1); }, &ran));
  // A later record of e on a free stream does not release the wait already queued.
  CU_OK(cuEventRecord(e, third));
  CU_OK(cuStreamSynchronize(third));
  CU_OK(cuEventQuery(e));
  for (int i = 0; i < 20; i++) std::this_thread::yield();
  EXPECT_EQ(CUDA_ERROR_NOT_READY, cuStreamQuery(other));
  EXPECT_EQ(0, ran.load());
  gate.open();
  CU_OK(cuStreamSynchronize(other));
  EXPECT_EQ(1, ran.load());
  CU_OK(cuEventSynchronize(e));
  CU_OK(cuEventDestroy(e));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(e));
  CU_OK(cuEventDestroy(never));
  CU_OK(cuStreamDestroy(other));
  CU_OK(cuStreamDestroy(third));
}

TEST_F(FakeCuda, StreamMemoryOperationsWaitAndWrite) {
  void* host = nullptr;
  CU_OK(cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  auto* words = static_cast<uint64_t*>(host);  // the flag, and a word the stream writes
  auto store = [&](int i, uint64_t v) { __atomic_store_n(&words[i], v, __ATOMIC_RELEASE); };
  auto load = [&](int i) { return __atomic_load_n(&words[i], __ATOMIC_ACQUIRE); };
  store(0, 3);
  store(1, 0);
  CUdeviceptr flag = 0, out = 0, dev = 0;
  CU_OK(cuMemHostGetDevicePointer(&flag, host, 0));
  out = flag + 8;
  CU_OK(cuStreamWaitValue64(stream_, flag, 5, CU_STREAM_WAIT_VALUE_GEQ));
  CU_OK(cuStreamWriteValue64(stream_, out, 7, 0));
  for (int i = 0; i < 20; i++) std::this_thread::yield();
  EXPECT_EQ(0u, load(1));
  EXPECT_EQ(CUDA_ERROR_NOT_READY, cuStreamQuery(stream_));
  store(0, 5);
  CU_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ(7u, load(1));
  // GEQ compares as a signed difference (wraps like the GPU's); EQ is exact. Device memory works too.
  store(0, 1);
  CU_OK(cuStreamWaitValue64(stream_, flag, ~uint64_t{0} - 1, CU_STREAM_WAIT_VALUE_GEQ));
  CU_OK(cuMemAlloc(&dev, 8));
  CU_OK(cuStreamWriteValue64(stream_, dev, 42, 0));
  CU_OK(cuStreamWaitValue64(stream_, dev, 42, CU_STREAM_WAIT_VALUE_EQ));
  CU_OK(cuStreamSynchronize(stream_));
  uint64_t back = 0;
  CU_OK(cuMemcpyDtoH(&back, dev, 8));
  EXPECT_EQ(42u, back);
  uint64_t pageable = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuStreamWriteValue64(stream_, reinterpret_cast<CUdeviceptr>(&pageable), 1, 0));
  if (onFake()) {
    EXPECT_GE(fakeCudaMemopRuns(), 5u);
  }
  CU_OK(cuMemFree(dev));
  CU_OK(cuMemFreeHost(host));
}

TEST_F(FakeCuda, KernelsComputeWhatTheCudaKernelsDo) {
  const size_t n = 1000;
  std::vector<float> a(n), b(n), out(n);
  std::vector<int32_t> ia(n), iout(n);
  for (size_t i = 0; i < n; i++) {
    a[i] = 0.5f * static_cast<float>(i);
    b[i] = 3.0f - static_cast<float>(i);
    ia[i] = static_cast<int32_t>(7 * i) - 2000;
  }
  CUdeviceptr da = upload(a.data(), n * 4), db = upload(b.data(), n * 4), dout = 0, di = upload(ia.data(), n * 4);
  CU_OK(cuMemAlloc(&dout, n * 4));
  size_t count = n;
  CU_OK(launch(function("accl_reduce2_float32_sum"), {&dout, &da, &db, &count}, stream_));
  CU_OK(cuMemcpyDtoHAsync(out.data(), dout, n * 4, stream_));
  CU_OK(cuStreamSynchronize(stream_));
  for (size_t i = 0; i < n; i++) ASSERT_EQ(a[i] + b[i], out[i]) << i;

  CU_OK(launch(function("accl_reduce2_float32_max"), {&dout, &da, &db, &count}, stream_));
  CU_OK(cuMemcpyDtoHAsync(out.data(), dout, n * 4, stream_));
  CU_OK(cuStreamSynchronize(stream_));
  for (size_t i = 0; i < n; i++) ASSERT_EQ(std::max(a[i], b[i]), out[i]) << i;

  const float factor = 0.25f;
  CUdeviceptr dk = upload(&factor, 4);
  CU_OK(launch(function("accl_scale_float32"), {&dout, &da, &dk, &count}, stream_));
  CU_OK(cuMemcpyDtoHAsync(out.data(), dout, n * 4, stream_));
  CU_OK(cuStreamSynchronize(stream_));
  for (size_t i = 0; i < n; i++) ASSERT_EQ(a[i] * 0.25f, out[i]) << i;

  int divisor = 3;
  CU_OK(launch(function("accl_divide_int32"), {&dout, &di, &divisor, &count}, stream_));
  CU_OK(cuMemcpyDtoHAsync(iout.data(), dout, n * 4, stream_));
  CU_OK(cuStreamSynchronize(stream_));
  for (size_t i = 0; i < n; i++) ASSERT_EQ(ia[i] / 3, iout[i]) << i;

  size_t bytes = n * 4 - 3;
  CUdeviceptr src = da + 1;
  CU_OK(launch(function("accl_copy"), {&dout, &src, &bytes}, stream_));
  std::vector<char> copied(bytes);
  CU_OK(cuMemcpyDtoHAsync(copied.data(), dout, bytes, stream_));
  CU_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ(0, std::memcmp(copied.data(), reinterpret_cast<const char*>(a.data()) + 1, bytes));
  if (onFake()) {
    EXPECT_GE(fakeCudaKernelRuns("accl_copy"), 1u);
  }

  CUmodule m = nullptr;
  CUfunction f = nullptr;
  CU_OK(cuModuleLoadData(&m, kernelImage().data()));
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, m, "accl_reduce2_float32_avg"));
  for (CUdeviceptr p : {da, db, dout, di, dk}) CU_OK(cuMemFree(p));
}

TEST_F(FakeCuda, FlagKernelsWriteAndWaitOnMappedHostMemory) {
  void* host = nullptr;
  CU_OK(cuMemHostAlloc(&host, 16, CU_MEMHOSTALLOC_DEVICEMAP));
  auto* words = static_cast<unsigned long long*>(host);
  words[0] = 0;  // before any launch: no one else looks yet
  words[1] = 0;
  CUdeviceptr flag = reinterpret_cast<CUdeviceptr>(host), out = flag + 8;
  unsigned long long want = 4, written = 9;
  int geq = 0;
  // Both looked up before the first launch: with lazy loading, a lookup while the waiting
  // kernel spins would synchronize the context and never return.
  CUfunction waitFlag = function("accl_wait_flag"), writeFlag = function("accl_write_flag");
  CU_OK(launch(waitFlag, {&flag, &want, &geq}, stream_));
  CU_OK(launch(writeFlag, {&out, &written}, stream_));
  EXPECT_EQ(CUDA_ERROR_NOT_READY, cuStreamQuery(stream_));
  __atomic_store_n(&words[0], 6ull, __ATOMIC_RELEASE);  // the waiting kernel polls it
  CU_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ(9u, words[1]);
  CU_OK(cuMemFreeHost(host));
}

TEST_F(FakeCuda, CopiesUseAnyHostMemoryAndSynchronousOnesWait) {
  std::vector<uint8_t> src(10000), back(10000);
  for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<uint8_t>(i * 31);
  CUdeviceptr a = 0, b = 0;
  CU_OK(cuMemAlloc(&a, src.size()));
  CU_OK(cuMemAllocAsync(&b, src.size(), stream_));
  CU_OK(cuMemcpyHtoDAsync(a, src.data(), src.size(), stream_));
  CU_OK(cuMemcpyAsync(b, a, src.size(), stream_));
  CU_OK(cuMemsetD8Async(a, 0xEE, 16, stream_));
  CU_OK(cuStreamSynchronize(stream_));
  CU_OK(cuMemcpyDtoH(back.data(), b, back.size()));
  EXPECT_EQ(src, back);
  CU_OK(cuMemcpyDtoH(back.data(), a, 16));
  for (int i = 0; i < 16; i++) EXPECT_EQ(0xEE, back[i]);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a + 1, src.data(), src.size()));  // runs past the allocation
  CU_OK(cuMemFreeAsync(b, stream_));
  CU_OK(cuStreamSynchronize(stream_));
  unsigned type = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, b));
  CU_OK(cuMemFree(a));
}

TEST_F(FakeCuda, KernelTouchingUnregisteredHostMemoryFaultsTheStream) {
  std::vector<char> pageable(256, 1);
  CUdeviceptr dst = 0;
  CU_OK(cuMemAlloc(&dst, 256));
  CUdeviceptr src = reinterpret_cast<CUdeviceptr>(pageable.data());
  size_t bytes = 256;
  ::testing::internal::CaptureStderr();
  CU_OK(launch(function("accl_copy"), {&dst, &src, &bytes}, stream_));  // accepted: faults when it runs
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(stream_));
  const std::string err = ::testing::internal::GetCapturedStderr();
  char addr[32];
  snprintf(addr, sizeof addr, "0x%llx", src);
  if (onFake()) {
    EXPECT_NE(std::string::npos, err.find(addr)) << err;
    EXPECT_NE(std::string::npos, err.find("illegal address")) << err;
  }
  // Sticky: later work does not run, and every later query and synchronize says so.
  std::atomic<int> ran{0};
  CU_OK(cuLaunchHostFunc(stream_, [](void* p) { static_cast<std::atomic<int>*>(p)->store(1); }, &ran));
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(stream_));
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamQuery(stream_));
  EXPECT_EQ(0, ran.load());
  const char* text = nullptr;
  CU_OK(cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &text));
  EXPECT_STREQ("an illegal memory access was encountered", text);
  CU_OK(cuGetErrorName(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, &text));
  EXPECT_STREQ("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", text);
}

TEST_F(FakeCuda, IpcHandleOpensInAnotherProcessOnly) {
  const size_t bytes = 3 * 4096 + 100;
  CUdeviceptr keep = 0, p = 0;
  CU_OK(cuMemAlloc(&keep, 5000));  // so p is not at the start of the memory
  CU_OK(cuMemAlloc(&p, bytes));
  CU_OK(cuMemsetD8(p, 0x5A, bytes));
  CUipcMemHandle handle;
  CU_OK(cuIpcGetMemHandle(&handle, p));
  CUdeviceptr same = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, cuIpcOpenMemHandle(&same, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  std::string hex;
  for (size_t i = 0; i < sizeof handle; i++) {
    char two[3];
    snprintf(two, sizeof two, "%02x", static_cast<unsigned char>(handle.reserved[i]));
    hex += two;
  }
  const std::string size = std::to_string(bytes);
  const char* argv[] = {FAKE_CUDA_IPC_PEER, hex.c_str(), size.c_str(), "90", "51", nullptr};  // 0x5A, 0x33
  pid_t pid = 0;
  ASSERT_EQ(0, posix_spawn(&pid, FAKE_CUDA_IPC_PEER, nullptr, nullptr, const_cast<char**>(argv), environ));
  int status = 0;
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "peer status " << status;
  std::vector<unsigned char> back(bytes);
  CU_OK(cuMemcpyDtoH(back.data(), p, bytes));
  for (size_t i = 0; i < bytes; i++) ASSERT_EQ(0x33, back[i]) << i;
  CU_OK(cuMemFree(p));
  CU_OK(cuMemFree(keep));
}

TEST_F(FakeCuda, CapturedWorkRunsOnlyWhenTheGraphIsLaunchedAndReplays) {
  const size_t n = 64;
  std::vector<int64_t> acc(n, 100), x(n);
  for (size_t i = 0; i < n; i++) x[i] = static_cast<int64_t>(i);
  CUdeviceptr dacc = upload(acc.data(), n * 8), dx = upload(x.data(), n * 8);
  void* host = nullptr;
  CU_OK(cuMemHostAlloc(&host, 8, 0));
  auto* flag = static_cast<volatile uint64_t*>(host);
  *flag = 0;
  std::atomic<int> hostRuns{0};
  CUfunction sum = function("accl_reduce2_int64_sum");
  size_t count = n;
  const unsigned long long kernelsBefore = onFake() ? fakeCudaKernelRuns("accl_reduce2_int64_sum") : 0;

  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CU_OK(cuStreamIsCapturing(stream_, &status));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, status);
  CU_OK(launch(sum, {&dacc, &dacc, &dx, &count}, stream_));
  CU_OK(cuLaunchHostFunc(stream_, [](void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }, &hostRuns));
  CU_OK(cuStreamWaitValue64(stream_, reinterpret_cast<CUdeviceptr>(host), 0, CU_STREAM_WAIT_VALUE_GEQ));
  CU_OK(cuStreamWriteValue64(stream_, reinterpret_cast<CUdeviceptr>(host), 1, 0));
  CUgraph graph = nullptr;
  CU_OK(cuStreamEndCapture(stream_, &graph));
  ASSERT_NE(nullptr, graph);
  CU_OK(cuStreamIsCapturing(stream_, &status));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_NONE, status);
  CU_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ(0, hostRuns.load());
  EXPECT_EQ(0u, *flag);

  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; i++) CU_OK(cuGraphLaunch(exec, stream_));
  CU_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ(3, hostRuns.load());
  EXPECT_EQ(1u, *flag);
  if (onFake()) {
    EXPECT_EQ(kernelsBefore + 3, fakeCudaKernelRuns("accl_reduce2_int64_sum"));
  }
  CU_OK(cuMemcpyDtoH(acc.data(), dacc, n * 8));
  for (size_t i = 0; i < n; i++) ASSERT_EQ(100 + 3 * static_cast<int64_t>(i), acc[i]) << i;
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(graph));
  CU_OK(cuMemFreeHost(host));
  CU_OK(cuMemFree(dacc));
  CU_OK(cuMemFree(dx));
}

TEST_F(FakeCuda, SynchronizingACapturingStreamFailsAndInvalidatesTheCapture) {
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamSynchronize(stream_));
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CU_OK(cuStreamIsCapturing(stream_, &status));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_INVALIDATED, status);
  CUgraph graph = reinterpret_cast<CUgraph>(1);
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
  EXPECT_EQ(nullptr, graph);
  CU_OK(cuStreamSynchronize(stream_));
}

}  // namespace

namespace {

TEST_F(FakeCuda, StreamsForkedIntoACaptureAreRecordedAndJoinBack) {
  CUstream side = nullptr;
  CU_OK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
  CUevent fork = nullptr, join = nullptr, outside = nullptr;
  CU_OK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventCreate(&outside, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventRecord(outside, side));
  std::vector<int> order;
  std::pair<std::vector<int>*, int> first{&order, 1}, second{&order, 2}, third{&order, 3};

  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, cuStreamWaitEvent(stream_, outside, 0));
  CU_OK(cuLaunchHostFunc(stream_, appendIndex, &first));
  CU_OK(cuEventRecord(fork, stream_));
  CU_OK(cuStreamWaitEvent(side, fork, 0));  // side joins the capture
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CU_OK(cuStreamIsCapturing(side, &status));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, status);
  CU_OK(cuLaunchHostFunc(side, appendIndex, &second));
  CU_OK(cuEventRecord(join, side));
  CU_OK(cuStreamWaitEvent(stream_, join, 0));
  CU_OK(cuLaunchHostFunc(stream_, appendIndex, &third));
  CUgraph graph = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, cuStreamEndCapture(side, &graph));
  CU_OK(cuStreamEndCapture(stream_, &graph));
  CU_OK(cuStreamIsCapturing(side, &status));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_NONE, status);
  CU_OK(cuStreamSynchronize(side));
  EXPECT_TRUE(order.empty());

  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, graph, 0));
  CU_OK(cuGraphLaunch(exec, stream_));
  CU_OK(cuGraphLaunch(exec, stream_));
  CU_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ((std::vector<int>{1, 2, 3, 1, 2, 3}), order);
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(graph));
  for (CUevent e : {fork, join, outside}) CU_OK(cuEventDestroy(e));
  CU_OK(cuStreamDestroy(side));
}

// Like the real driver: a child forked after cuInit cannot use CUDA, and says so instead of
// waiting forever on stream threads that fork did not copy.
TEST_F(FakeCuda, ChildForkedAfterInitGetsNotInitialized) {
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 64));
  fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int ok = cuInit(0) == CUDA_ERROR_NOT_INITIALIZED && cuMemsetD8(p, 1, 64) == CUDA_ERROR_NOT_INITIALIZED &&
             cuStreamSynchronize(nullptr) == CUDA_ERROR_NOT_INITIALIZED;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  CU_OK(cuMemFree(p));
}

}  // namespace

namespace {

// Several threads, each with its own stream, at once: kernels, copies, events across streams
// and memory operations, results checked (what a multi-threaded backend does to the driver).
TEST_F(FakeCuda, ThreadsWithTheirOwnStreamsRunConcurrentlyAndCorrectly) {
  constexpr int kThreads = 4, kRounds = 30;
  const size_t n = 4096;
  CUfunction sum = function("accl_reduce2_int32_sum");
  CUevent ready[kThreads];
  CUstream streams[kThreads];
  for (int t = 0; t < kThreads; t++) {
    CU_OK(cuEventCreate(&ready[t], CU_EVENT_DISABLE_TIMING));
    CU_OK(cuStreamCreate(&streams[t], CU_STREAM_NON_BLOCKING));
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      if (cuCtxSetCurrent(ctx_) != CUDA_SUCCESS) return void(failures++);
      std::vector<int32_t> ones(n, 1), back(n);
      CUdeviceptr acc = 0, one = 0;
      size_t count = n;
      if (cuMemAlloc(&acc, n * 4) || cuMemAlloc(&one, n * 4)) return void(failures++);
      CUstream s = streams[t];
      cuMemsetD8Async(acc, 0, n * 4, s);
      cuMemcpyHtoDAsync(one, ones.data(), n * 4, s);
      for (int r = 0; r < kRounds; r++) {
        std::vector<void*> params = {&acc, &acc, &one, &count};
        if (cuLaunchKernel(sum, 1, 1, 1, 32, 1, 1, 0, s, params.data(), nullptr)) failures++;
        cuEventRecord(ready[t], s);
        cuStreamWaitEvent(streams[(t + 1) % kThreads], ready[t], 0);  // cross-stream edges
      }
      cuMemcpyDtoHAsync(back.data(), acc, n * 4, s);
      if (cuStreamSynchronize(s) != CUDA_SUCCESS) failures++;
      for (size_t i = 0; i < n; i++)
        if (back[i] != kRounds) return void(failures++);
      cuMemFree(acc);
      cuMemFree(one);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  for (int t = 0; t < kThreads; t++) {
    CU_OK(cuStreamSynchronize(streams[t]));
    CU_OK(cuStreamDestroy(streams[t]));
    CU_OK(cuEventDestroy(ready[t]));
  }
}

}  // namespace

namespace {

TEST_F(FakeCuda, ContextStackMemoryInfoTimingAnd32BitOperations) {
  NEEDS_TWO_DEVICES();
  // Context stack: push/pop around the current context.
  CUcontext ctx1 = nullptr, popped = nullptr, cur = nullptr;
  CU_OK(cuDevicePrimaryCtxRetain(&ctx1, 1));
  CU_OK(cuCtxPushCurrent(ctx1));
  CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(ctx1, cur);
  CU_OK(cuCtxPopCurrent(&popped));
  EXPECT_EQ(ctx1, popped);
  CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(ctx_, cur);
  int peer = -1;
  CU_OK(cuDeviceCanAccessPeer(&peer, 0, 1));
  EXPECT_EQ(1, peer);
  CU_OK(cuCtxEnablePeerAccess(ctx1, 0));
  EXPECT_EQ(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, cuCtxEnablePeerAccess(ctx1, 0));
  CU_OK(cuCtxDisablePeerAccess(ctx1));
  EXPECT_EQ(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, cuCtxDisablePeerAccess(ctx1));
  CU_OK(cuDevicePrimaryCtxRelease(1));

  // Memory info follows allocations.
  size_t free0 = 0, total = 0, free1 = 0;
  CU_OK(cuMemGetInfo(&free0, &total));
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 1 << 20));
  CU_OK(cuMemGetInfo(&free1, &total));
  if (onFake()) {
    EXPECT_EQ(free0 - (1 << 20), free1);
  } else {
    EXPECT_LE(free1, free0 - (1 << 20));  // the real driver rounds allocations up
  }

  // 32-bit set and memory operations.
  CU_OK(cuMemsetD32Async(p, 0xA5A5A5A5u, 4, stream_));
  CU_OK(cuStreamWriteValue32(stream_, p + 4, 17, 0));
  CU_OK(cuStreamWaitValue32(stream_, p + 4, 17, CU_STREAM_WAIT_VALUE_EQ));
  uint32_t back[4] = {};
  CU_OK(cuMemcpyDtoHAsync(back, p, sizeof back, stream_));
  CU_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ(0xA5A5A5A5u, back[0]);
  EXPECT_EQ(17u, back[1]);
  EXPECT_EQ(0xA5A5A5A5u, back[3]);

  // Timing events: elapsed time between two records that completed.
  CUevent a = nullptr, b = nullptr, untimed = nullptr;
  CU_OK(cuEventCreate(&a, 0));
  CU_OK(cuEventCreate(&b, 0));
  CU_OK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  float ms = -1;
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, b));  // not recorded yet
  CU_OK(cuEventRecord(a, stream_));
  CU_OK(cuMemsetD8Async(p, 0, 1 << 20, stream_));
  CU_OK(cuEventRecord(b, stream_));
  CU_OK(cuEventRecord(untimed, stream_));
  CU_OK(cuEventSynchronize(b));
  CU_OK(cuEventElapsedTime(&ms, a, b));
  EXPECT_GE(ms, 0.0f);
  CU_OK(cuEventSynchronize(untimed));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, untimed));
  for (CUevent e : {a, b, untimed}) CU_OK(cuEventDestroy(e));

  int threads = 0, blocks = 0;
  CUfunction f = function("accl_copy");
  CU_OK(cuFuncGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
  EXPECT_EQ(1024, threads);
  CU_OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0));
  EXPECT_EQ(8, blocks);
  CU_OK(cuMemFree(p));
}

}  // namespace

namespace {

// Two branches that wait on each other through memory (as two ranks' gates do): a replay that
// ran the branches one after the other would never finish; the GPU runs them concurrently.
TEST_F(FakeCuda, BranchesOfALaunchedGraphRunConcurrently) {
  CUstream side = nullptr;
  CU_OK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
  CUevent fork = nullptr, join = nullptr;
  CU_OK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
  void* host = nullptr;
  CU_OK(cuMemHostAlloc(&host, 16, CU_MEMHOSTALLOC_DEVICEMAP));
  auto* words = static_cast<uint64_t*>(host);
  words[0] = words[1] = 0;
  const CUdeviceptr a = reinterpret_cast<CUdeviceptr>(host), b = a + 8;

  CU_OK(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuEventRecord(fork, stream_));
  CU_OK(cuStreamWaitEvent(side, fork, 0));
  CU_OK(cuStreamWaitValue64(stream_, b, 1, CU_STREAM_WAIT_VALUE_EQ));  // branch 0 waits for branch 1 ...
  CU_OK(cuStreamWriteValue64(stream_, a, 1, 0));
  CU_OK(cuStreamWriteValue64(side, b, 1, 0));
  CU_OK(cuStreamWaitValue64(side, a, 1, CU_STREAM_WAIT_VALUE_EQ));  // ... which then waits for branch 0
  CU_OK(cuEventRecord(join, side));
  CU_OK(cuStreamWaitEvent(stream_, join, 0));
  CU_OK(cuStreamWriteValue64(stream_, a, 0, 0));  // re-armed once both passed, for the next replay
  CU_OK(cuStreamWriteValue64(stream_, b, 0, 0));
  CUgraph graph = nullptr;
  CU_OK(cuStreamEndCapture(stream_, &graph));
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, graph, 0));
  const unsigned long long before = onFake() ? fakeCudaMemopRuns() : 0;
  for (int i = 0; i < 3; i++) CU_OK(cuGraphLaunch(exec, stream_));
  CU_OK(cuStreamSynchronize(stream_));  // returns only after both branches of every launch ended
  if (onFake()) {
    EXPECT_EQ(before + 3 * 6, fakeCudaMemopRuns());
  }
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(graph));
  CU_OK(cuEventQuery(fork));  // events recorded inside a capture do not stay pending
  CU_OK(cuEventDestroy(fork));
  CU_OK(cuEventDestroy(join));
  CU_OK(cuStreamDestroy(side));
  CU_OK(cuMemFreeHost(host));
}

}  // namespace

namespace {

// cuMemFree waits for the context's work on cuMemAlloc'd memory (a kernel may still use it),
// but frees cuMemAllocAsync'd memory at once, as documented.
TEST_F(FakeCuda, MemFreeWaitsForTheContextExceptForStreamOrderedMemory) {
  Gate gate;
  CUdeviceptr plain = 0, ordered = 0;
  CU_OK(cuMemAlloc(&plain, 256));
  CU_OK(cuLaunchHostFunc(stream_, Gate::wait, &gate));
  CU_OK(cuMemAllocAsync(&ordered, 256, stream_));
  CU_OK(cuMemFree(ordered));  // returns although the stream is held
  std::atomic<bool> freed{false};
  std::thread t([&] {
    EXPECT_EQ(CUDA_SUCCESS, cuCtxSetCurrent(ctx_));
    EXPECT_EQ(CUDA_SUCCESS, cuMemFree(plain));
    freed = true;
  });
  for (int i = 0; i < 200 && !freed; i++) std::this_thread::yield();
  EXPECT_FALSE(freed.load());
  gate.open();
  t.join();
  EXPECT_TRUE(freed.load());
}

}  // namespace

namespace {

// The NULL stream is per device: work held on device 0's does not hold device 1's (two ranks
// on two devices, both on the NULL stream, must not wait for each other).
TEST_F(FakeCuda, EachDeviceHasItsOwnDefaultStream) {
  NEEDS_TWO_DEVICES();
  Gate gate;
  CU_OK(cuLaunchHostFunc(nullptr, Gate::wait, &gate));
  CUcontext ctx1 = nullptr;
  CU_OK(cuDevicePrimaryCtxRetain(&ctx1, 1));
  std::thread([&] {
    EXPECT_EQ(CUDA_SUCCESS, cuCtxSetCurrent(ctx1));
    std::atomic<int> ran{0};
    EXPECT_EQ(CUDA_SUCCESS, cuLaunchHostFunc(nullptr, [](void* p) { static_cast<std::atomic<int>*>(p)->store(1); }, &ran));
    EXPECT_EQ(CUDA_SUCCESS, cuStreamSynchronize(nullptr));  // device 1's NULL stream: not held
    EXPECT_EQ(1, ran.load());
  }).join();
  EXPECT_EQ(CUDA_ERROR_NOT_READY, cuStreamQuery(nullptr));
  gate.open();
  CU_OK(cuStreamSynchronize(nullptr));
  CU_OK(cuDevicePrimaryCtxRelease(1));
}

TEST_F(FakeCuda, CallLogRecordsCallsAndQueuedWorkSinceItsReset) {
  NEEDS_FAKE();
  const size_t n = 64;
  std::vector<float> a(n, 1.5f);
  CUdeviceptr da = upload(a.data(), n * 4), dout = 0;
  CUfunction sum = function("accl_reduce2_float32_sum");
  CUevent ev = nullptr;
  CU_OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));

  fakeCudaLogReset();
  EXPECT_EQ(0u, fakeCudaDriverCalls(nullptr));
  CU_OK(cuMemAlloc(&dout, n * 4));
  unsigned memType = 0;
  CU_OK(cuPointerGetAttribute(&memType, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dout));
  EXPECT_NE(CUDA_SUCCESS, cuPointerGetAttribute(&memType, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0));  // counted too
  CU_OK(cuMemsetD8Async(dout, 0, n * 4, stream_));
  size_t count = n;
  CU_OK(launch(sum, {&dout, &da, &da, &count}, stream_));
  CU_OK(cuEventRecord(ev, stream_));
  CU_OK(cuStreamWaitEvent(nullptr, ev, 0));
  CU_OK(cuMemcpyDtoDAsync(da, dout, n * 4, stream_));
  std::vector<float> out(n);
  CU_OK(cuStreamSynchronize(stream_));  // the synchronous copy below runs on the default stream
  CU_OK(cuMemcpyDtoH(out.data(), da, n * 4));
  CU_OK(cuMemcpyHtoDAsync(dout, a.data(), 4, stream_));
  CU_OK(cuStreamSynchronize(stream_));
  for (float v : out) ASSERT_EQ(3.0f, v);

  EXPECT_EQ(1u, fakeCudaDriverCalls("cuMemAlloc"));  // cuMemAlloc_v2, named as cuda.h does
  EXPECT_EQ(1u, fakeCudaDriverCalls("cuMemAlloc_v2"));
  EXPECT_EQ(2u, fakeCudaDriverCalls("cuPointerGetAttribute"));
  EXPECT_EQ(1u, fakeCudaDriverCalls("cuLaunchKernel"));
  EXPECT_EQ(0u, fakeCudaDriverCalls("cuEventCreate"));
  EXPECT_EQ(0u, fakeCudaDriverCalls("cuNoSuchEntryPoint"));
  EXPECT_EQ(1u, fakeCudaQueued(FAKE_CUDA_QUEUED_LAUNCH));
  EXPECT_EQ(1u, fakeCudaQueued(FAKE_CUDA_QUEUED_MEMSET));
  EXPECT_EQ(1u, fakeCudaQueued(FAKE_CUDA_QUEUED_EVENT_RECORD));
  EXPECT_EQ(1u, fakeCudaQueued(FAKE_CUDA_QUEUED_STREAM_WAIT));
  EXPECT_EQ(3u, fakeCudaQueued(FAKE_CUDA_QUEUED_MEMCPY));
  EXPECT_EQ(0u, fakeCudaQueued(FAKE_CUDA_QUEUED_MEMOP));
  EXPECT_EQ(0u, fakeCudaQueued(-1));

  FakeCudaLaunch l{};
  ASSERT_EQ(0, fakeCudaLaunchAt(0, &l));
  EXPECT_STREQ("accl_reduce2_float32_sum", l.kernel);
  EXPECT_EQ(4u, l.grid[0]);  // the fixture's launch(): 4 blocks of 128 threads
  EXPECT_EQ(1u, l.grid[1] * l.grid[2]);
  EXPECT_EQ(128u, l.block[0]);
  EXPECT_EQ(1u, l.block[1] * l.block[2]);
  EXPECT_EQ(3 * sizeof(CUdeviceptr) + sizeof(size_t), l.argBytes);
  EXPECT_EQ(-1, fakeCudaLaunchAt(1, &l));

  const struct {
    int direction, async;
    unsigned long long bytes;
  } copies[] = {{FAKE_CUDA_DEVICE_TO_DEVICE, 1, n * 4}, {FAKE_CUDA_DEVICE_TO_HOST, 0, n * 4},
                {FAKE_CUDA_HOST_TO_DEVICE, 1, 4}};
  for (unsigned i = 0; i < 3; i++) {
    FakeCudaCopy c{};
    ASSERT_EQ(0, fakeCudaCopyAt(i, &c)) << i;
    EXPECT_EQ(copies[i].direction, c.direction) << i;
    EXPECT_EQ(copies[i].async, c.async) << i;
    EXPECT_EQ(copies[i].bytes, c.bytes) << i;
  }
  FakeCudaCopy none{};
  EXPECT_EQ(-1, fakeCudaCopyAt(3, &none));

  fakeCudaLogReset();
  EXPECT_EQ(0u, fakeCudaDriverCalls(nullptr));
  EXPECT_EQ(0u, fakeCudaQueued(FAKE_CUDA_QUEUED_LAUNCH));
  EXPECT_EQ(-1, fakeCudaLaunchAt(0, &l));
  CU_OK(cuEventDestroy(ev));
  for (CUdeviceptr p : {da, dout}) CU_OK(cuMemFree(p));
}

}  // namespace
