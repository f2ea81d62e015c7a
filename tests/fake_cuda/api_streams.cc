// api_streams.cc: the stream entry points: create/destroy/synchronize/query, host functions
// and the 64-bit stream memory operations (write a value; wait until a value compares).
#include <sched.h>
#include <time.h>
#include <type_traits>
#include "fake_cuda_test_api.h"
#include "internal.h"

using namespace fakecuda;

FAKE_CUDA_API CUresult cuStreamCreate(CUstream* phStream, unsigned int flags) {
  noteCall("cuStreamCreate");
  if (phStream == nullptr || (flags & ~unsigned{CU_STREAM_NON_BLOCKING}) != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  Stream* s = nullptr;
  if (CUresult r = createStream(ctx, flags, &s)) return r;
  *phStream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int) {
  noteCall("cuStreamCreateWithPriority");
  return cuStreamCreate(phStream, flags);
}

FAKE_CUDA_API CUresult cuStreamDestroy_v2(CUstream hStream) { noteCall("cuStreamDestroy_v2"); return destroyStream(hStream); }

FAKE_CUDA_API CUresult cuStreamSynchronize(CUstream hStream) {
  noteCall("cuStreamSynchronize");
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  return s->synchronize();
}

FAKE_CUDA_API CUresult cuStreamQuery(CUstream hStream) {
  noteCall("cuStreamQuery");
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  return s->query();
}

FAKE_CUDA_API CUresult cuStreamGetCtx(CUstream hStream, CUcontext* pctx) {
  noteCall("cuStreamGetCtx");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  Context* ctx = s->ctx();
  if (ctx == nullptr && currentContext(&ctx) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  *pctx = asHandle(ctx);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuStreamGetId(CUstream hStream, unsigned long long* streamId) {
  noteCall("cuStreamGetId");
  if (streamId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  *streamId = s->id();
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuStreamGetFlags(CUstream hStream, unsigned int* flags) {
  noteCall("cuStreamGetFlags");
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  *flags = s->flags();
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  noteCall("cuLaunchHostFunc");
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  s->enqueue(work([fn, userData] {
    fn(userData);
    return CUDA_SUCCESS;
  }));
  return CUDA_SUCCESS;
}

namespace {

// Memory operations need memory the device can reach: device memory or registered/mapped host
// memory. Anything else is refused at the call, as the real driver does.
CUresult checkMemopAddress(const char* what, CUdeviceptr addr, size_t bytes) {
  if (addr % bytes != 0) return CUDA_ERROR_INVALID_VALUE;
  if (kernelAddress(addr, bytes) == nullptr) {
    report("%s: address 0x%llx is neither device memory nor registered host memory", what, addr);
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

template <class T>
T* memopWord(const char* what, CUdeviceptr addr) {
  char* p = kernelAddress(addr, sizeof(T));
  if (p == nullptr) report("%s: address 0x%llx was freed or unregistered before the stream got there", what, addr);
  return reinterpret_cast<T*>(p);
}

template <class T>
bool satisfied(T seen, T value, unsigned kind) {
  using Signed = std::make_signed_t<T>;
  switch (kind) {
    case CU_STREAM_WAIT_VALUE_GEQ: return static_cast<Signed>(seen - value) >= 0;  // wrap-safe, as the GPU
    case CU_STREAM_WAIT_VALUE_EQ: return seen == value;
    case CU_STREAM_WAIT_VALUE_AND: return (seen & value) != 0;
    case CU_STREAM_WAIT_VALUE_NOR: return static_cast<T>(~(seen | value)) != 0;
  }
  return true;
}

template <class T>
CUresult writeValue(const char* what, CUstream hStream, CUdeviceptr addr, T value, unsigned flags) {
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  if ((flags & ~unsigned{CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER}) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkMemopAddress(what, addr, sizeof(T))) return r;
  noteQueued(FAKE_CUDA_QUEUED_MEMOP);
  FAKE_CUDA_TRACE("stream %p: %s 0x%llx = %llu", static_cast<void*>(s), what, addr, static_cast<unsigned long long>(value));
  s->enqueue(work([what, addr, value] {
    T* word = memopWord<T>(what, addr);
    if (word == nullptr) return CUDA_ERROR_ILLEGAL_ADDRESS;
    countMemop();
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
  }));
  return CUDA_SUCCESS;
}

template <class T>
CUresult waitValue(const char* what, CUstream hStream, CUdeviceptr addr, T value, unsigned flags) {
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  const unsigned kind = flags & 0x3;
  if ((flags & ~(0x3u | CU_STREAM_WAIT_VALUE_FLUSH)) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkMemopAddress(what, addr, sizeof(T))) return r;
  noteQueued(FAKE_CUDA_QUEUED_MEMOP);
  FAKE_CUDA_TRACE("stream %p: %s 0x%llx %s %llu", static_cast<void*>(s), what, addr,
                  kind == CU_STREAM_WAIT_VALUE_EQ ? "==" : kind == CU_STREAM_WAIT_VALUE_GEQ ? ">=" : "&|",
                  static_cast<unsigned long long>(value));
  s->enqueue(work([what, addr, value, kind] {
    T* word = memopWord<T>(what, addr);
    if (word == nullptr) return CUDA_ERROR_ILLEGAL_ADDRESS;
    countMemop();
    // Poll like the GPU's front end does: a few yields, then short sleeps.
    for (int spins = 0; !satisfied<T>(__atomic_load_n(word, __ATOMIC_ACQUIRE), value, kind); spins++) {
      if (spins < 64) {
        sched_yield();
      } else {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
    return CUDA_SUCCESS;
  }));
  return CUDA_SUCCESS;
}

}  // namespace

FAKE_CUDA_API CUresult cuStreamWriteValue64_v2(CUstream hStream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  noteCall("cuStreamWriteValue64_v2");
  return writeValue<uint64_t>("cuStreamWriteValue64", hStream, addr, value, flags);
}
FAKE_CUDA_API CUresult cuStreamWaitValue64_v2(CUstream hStream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  noteCall("cuStreamWaitValue64_v2");
  return waitValue<uint64_t>("cuStreamWaitValue64", hStream, addr, value, flags);
}
FAKE_CUDA_API CUresult cuStreamWriteValue32_v2(CUstream hStream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  noteCall("cuStreamWriteValue32_v2");
  return writeValue<uint32_t>("cuStreamWriteValue32", hStream, addr, value, flags);
}
FAKE_CUDA_API CUresult cuStreamWaitValue32_v2(CUstream hStream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  noteCall("cuStreamWaitValue32_v2");
  return waitValue<uint32_t>("cuStreamWaitValue32", hStream, addr, value, flags);
}
