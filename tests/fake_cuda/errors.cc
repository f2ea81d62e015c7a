// errors.cc: names and texts of the result codes the fake returns (the real driver's words),
// cuGetErrorName/cuGetErrorString, and the fake's stderr report line.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include "internal.h"

namespace fakecuda {
namespace {

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};

constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
     "peer access has not been enabled"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not ended in the same stream as it began"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "dependency created on uncaptured work in another stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT",
     "operation not permitted on an event last recorded in a capturing stream"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* find(CUresult r) {
  for (const ErrorText& e : kErrors)
    if (e.code == r) return &e;
  return nullptr;
}

}  // namespace

bool tracing() {
  static const bool on = [] {
    const char* env = std::getenv("FAKE_CUDA_TRACE");
    return env && *env && *env != '0';
  }();
  return on;
}

const char* errorName(CUresult r) {
  const ErrorText* e = find(r);
  return e ? e->name : nullptr;
}

const char* errorString(CUresult r) {
  const ErrorText* e = find(r);
  return e ? e->text : nullptr;
}

void report(const char* fmt, ...) {
  char line[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  fprintf(stderr, "fake libcuda: %s\n", line);
}

}  // namespace fakecuda

using namespace fakecuda;

// Unknown codes: CUDA_ERROR_INVALID_VALUE and *pStr = NULL, as the real driver does.
FAKE_CUDA_API CUresult cuGetErrorName(CUresult error, const char** pStr) {
  noteCall("cuGetErrorName");
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = errorName(error);
  return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_CUDA_API CUresult cuGetErrorString(CUresult error, const char** pStr) {
  noteCall("cuGetErrorString");
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = errorString(error);
  return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
