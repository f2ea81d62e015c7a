// api_memory.cc: the memory entry points: device and host allocation, registration, pointer
// attributes, and copies/sets (asynchronous ones on a stream, synchronous ones waiting on the
// default stream). Copies reach device memory through its shadow; any host memory may be used.
#include <cstring>
#include "fake_cuda_test_api.h"
#include "internal.h"

using namespace fakecuda;

namespace {

bool isDeviceKind(MemKind k) { return k == MemKind::Device || k == MemKind::Imported; }

// Checks both ends now (a device range overrun is CUDA_ERROR_INVALID_VALUE at the call) and
// resolves them again when the copy runs (memory freed meanwhile: an illegal address).
CUresult enqueueCopy(CUstream hStream, uintptr_t dst, uintptr_t src, size_t bytes, bool async = true) {
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  if (bytes == 0) return CUDA_SUCCESS;
  if (copyAddress(dst, bytes) == nullptr || copyAddress(src, bytes) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  noteCopy(dst, src, bytes, async);
  FAKE_CUDA_TRACE("stream %p: memcpy %zu bytes 0x%lx -> 0x%lx", static_cast<void*>(s), bytes, src, dst);
  s->enqueue(work([dst, src, bytes] {
    char* d = copyAddress(dst, bytes);
    char* from = copyAddress(src, bytes);
    if (d == nullptr || from == nullptr) {
      report("memcpy of %zu bytes 0x%lx -> 0x%lx: memory freed before the copy ran", bytes, src, dst);
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    countMemcpy();
    std::memmove(d, from, bytes);
    return CUDA_SUCCESS;
  }));
  return CUDA_SUCCESS;
}

// Sets count elements of T (8 or 32 bits) at dst.
template <class T>
CUresult enqueueSet(CUstream hStream, uintptr_t dst, T value, size_t count) {
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  if (count == 0) return CUDA_SUCCESS;
  const size_t bytes = count * sizeof(T);
  if (dst % sizeof(T) != 0 || kernelAddress(dst, bytes) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  noteQueued(FAKE_CUDA_QUEUED_MEMSET);
  s->enqueue(work([dst, value, count, bytes] {
    char* d = kernelAddress(dst, bytes);
    if (d == nullptr) return CUDA_ERROR_ILLEGAL_ADDRESS;
    if constexpr (sizeof(T) == 1) std::memset(d, value, count);
    else for (size_t i = 0; i < count; i++) std::memcpy(d + i * sizeof(T), &value, sizeof(T));
    return CUDA_SUCCESS;
  }));
  return CUDA_SUCCESS;
}

// Synchronous forms: queued on the default stream, then waited for.
CUresult waitDefault(CUresult queued) {
  if (queued != CUDA_SUCCESS) return queued;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(nullptr, &s)) return r;
  return s->synchronize();
}

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

FAKE_CUDA_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  noteCall("cuMemAlloc_v2");
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  if (CUresult r = refuseIfCaptureForbids("cuMemAlloc")) return r;
  uintptr_t p = 0;
  if (CUresult r = deviceAlloc(ctx, bytesize, false, &p)) return r;
  FAKE_CUDA_TRACE("cuMemAlloc %zu bytes: 0x%lx", bytesize, p);
  *dptr = p;
  return CUDA_SUCCESS;
}

// Like the real cuMemFree: waits for the context's work first (a kernel may still use it),
// except for stream-ordered memory (cuMemAllocAsync), which it frees at once, as documented.
FAKE_CUDA_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  noteCall("cuMemFree_v2");
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  if (CUresult r = refuseIfCaptureForbids("cuMemFree")) return r;
  if (dptr == 0) return CUDA_SUCCESS;
  Range r = findRange(dptr);
  if (r.kind != MemKind::Device || r.base != dptr) return CUDA_ERROR_INVALID_VALUE;
  FAKE_CUDA_TRACE("cuMemFree 0x%llx", dptr);
  if (!r.streamOrdered) drainContext(r.ctx);
  return deviceFree(dptr);
}

FAKE_CUDA_API CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  noteCall("cuMemAllocAsync");
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  if (s->captureStatus() != CU_STREAM_CAPTURE_STATUS_NONE) {
    report("cuMemAllocAsync while capturing: graph memory nodes are not emulated");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  Context* ctx = s->ctx();
  if (ctx == nullptr) currentContext(&ctx);
  uintptr_t p = 0;
  if (CUresult r = deviceAlloc(ctx, bytesize, true, &p)) return r;
  *dptr = p;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  noteCall("cuMemFreeAsync");
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  Range r = findRange(dptr);
  if (r.kind != MemKind::Device || r.base != dptr) return CUDA_ERROR_INVALID_VALUE;
  if (s->captureStatus() != CU_STREAM_CAPTURE_STATUS_NONE) {
    report("cuMemFreeAsync while capturing: graph memory nodes are not emulated");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  s->enqueue(work([dptr] { return deviceFree(dptr); }));
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  noteCall("cuMemGetAddressRange_v2");
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  Range r = findRange(dptr);
  if (!isDeviceKind(r.kind)) return CUDA_ERROR_NOT_FOUND;
  if (pbase) *pbase = r.base;
  if (psize) *psize = r.size;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
  noteCall("cuMemHostAlloc");
  if (pp == nullptr || (flags & ~0x7u) != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  if (CUresult r = refuseIfCaptureForbids("cuMemHostAlloc")) return r;
  return hostAlloc(ctx, bytesize, pp);
}

FAKE_CUDA_API CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) { noteCall("cuMemAllocHost_v2"); return cuMemHostAlloc(pp, bytesize, 0); }

FAKE_CUDA_API CUresult cuMemFreeHost(void* p) {
  noteCall("cuMemFreeHost");
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (CUresult r = refuseIfCaptureForbids("cuMemFreeHost")) return r;
  return hostFree(p);
}

FAKE_CUDA_API CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags) {
  noteCall("cuMemHostRegister_v2");
  if ((flags & ~0xFu) != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  if (CUresult r = refuseIfCaptureForbids("cuMemHostRegister")) return r;
  return hostRegister(ctx, p, bytesize, (flags & CU_MEMHOSTREGISTER_DEVICEMAP) != 0);
}

FAKE_CUDA_API CUresult cuMemHostUnregister(void* p) {
  noteCall("cuMemHostUnregister");
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  if (CUresult r = refuseIfCaptureForbids("cuMemHostUnregister")) return r;
  return hostUnregister(p);
}

// Unified addressing with CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM (as this device reports): the
// device sees mapped host memory at the same address, as the documentation says the real
// driver then returns. Registered memory that was not mapped (no DEVICEMAP) has none.
FAKE_CUDA_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int flags) {
  noteCall("cuMemHostGetDevicePointer_v2");
  if (pdptr == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  Range r = findRange(addr(p));
  if (r.kind != MemKind::HostAlloc && r.kind != MemKind::HostRegistered) return CUDA_ERROR_INVALID_VALUE;
  if (!r.deviceMapped) {
    report("cuMemHostGetDevicePointer(%p): registered without CU_MEMHOSTREGISTER_DEVICEMAP, so not mapped for the device",
           p);
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pdptr = addr(p);
  return CUDA_SUCCESS;
}

// Pointers the driver never saw (pageable host memory) are CUDA_ERROR_INVALID_VALUE, as with
// the real driver. IS_MANAGED is written as one byte (a bool), so int and bool callers both work.
FAKE_CUDA_API CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  noteCall("cuPointerGetAttribute");
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Range r = findRange(ptr);
  if (r.kind == MemKind::None) return CUDA_ERROR_INVALID_VALUE;
  const bool device = isDeviceKind(r.kind);
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = asHandle(r.ctx); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      if (!device && !r.deviceMapped) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (device) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<bool*>(data) = false; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = r.ctx ? r.ctx->device : 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = r.base; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = r.size; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: *static_cast<bool*>(data) = device || r.deviceMapped; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_CUDA_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream hStream) {
  noteCall("cuMemcpyAsync");
  return enqueueCopy(hStream, dst, src, bytes);
}
FAKE_CUDA_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream hStream) {
  noteCall("cuMemcpyHtoDAsync_v2");
  return enqueueCopy(hStream, dst, addr(src), bytes);
}
FAKE_CUDA_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream hStream) {
  noteCall("cuMemcpyDtoHAsync_v2");
  return enqueueCopy(hStream, addr(dst), src, bytes);
}
FAKE_CUDA_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream hStream) {
  noteCall("cuMemcpyDtoDAsync_v2");
  return enqueueCopy(hStream, dst, src, bytes);
}
FAKE_CUDA_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  noteCall("cuMemcpy");
  return waitDefault(enqueueCopy(nullptr, dst, src, bytes, false));
}
FAKE_CUDA_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  noteCall("cuMemcpyHtoD_v2");
  return waitDefault(enqueueCopy(nullptr, dst, addr(src), bytes, false));
}
FAKE_CUDA_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  noteCall("cuMemcpyDtoH_v2");
  return waitDefault(enqueueCopy(nullptr, addr(dst), src, bytes, false));
}
FAKE_CUDA_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  noteCall("cuMemcpyDtoD_v2");
  return waitDefault(enqueueCopy(nullptr, dst, src, bytes, false));
}
FAKE_CUDA_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream hStream) {
  noteCall("cuMemsetD8Async");
  return enqueueSet(hStream, dst, uc, n);
}
FAKE_CUDA_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n) {
  noteCall("cuMemsetD8_v2");
  return waitDefault(enqueueSet(nullptr, dst, uc, n));
}
FAKE_CUDA_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream hStream) {
  noteCall("cuMemsetD32Async");
  return enqueueSet(hStream, dst, ui, n);
}
FAKE_CUDA_API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int ui, size_t n) {
  noteCall("cuMemsetD32_v2");
  return waitDefault(enqueueSet(nullptr, dst, ui, n));
}

FAKE_CUDA_API CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  noteCall("cuMemGetInfo_v2");
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  *total = deviceMemoryBytes();
  *free = *total - deviceMemoryUsed();
  return CUDA_SUCCESS;
}
