// call_log.cc: what this process asked of the driver, for tests (fake_cuda_test_api.h): every
// entry point called, by name, and what was queued on streams (or captured): kernel launches
// with their geometry and argument bytes, memsets, event records, stream waits, copies with
// their direction, stream memory operations. Tests reset the log and read it around a call.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>
#include "fake_cuda_test_api.h"
#include "internal.h"

namespace fakecuda {
namespace {

constexpr size_t kKeptEntries = 4096;  // launches and copies kept in detail (all are counted)

struct CallLog {
  std::mutex mu;
  std::map<std::string, unsigned long long> calls;
  unsigned long long queued[FAKE_CUDA_QUEUED_KINDS] = {};
  std::vector<FakeCudaLaunch> launches;
  std::vector<FakeCudaCopy> copies;
};
CallLog& callLog() {
  static CallLog* log = new CallLog;
  return *log;
}

// "cuMemAlloc_v2" -> "cuMemAlloc": tests name the entry point as cuda.h's macros do.
std::string withoutVersion(const char* entry) {
  std::string s(entry);
  const size_t v = s.rfind("_v");
  if (v != std::string::npos && v + 2 < s.size() &&
      std::all_of(s.begin() + static_cast<long>(v) + 2, s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    s.resize(v);
  return s;
}

bool onDevice(uintptr_t addr) {
  MemKind k = findRange(addr).kind;
  return k == MemKind::Device || k == MemKind::Imported;
}

}  // namespace

void noteCall(const char* entry) {
  CallLog& log = callLog();
  std::lock_guard<std::mutex> g(log.mu);
  log.calls[entry]++;
}

void noteQueued(int kind) {
  CallLog& log = callLog();
  std::lock_guard<std::mutex> g(log.mu);
  log.queued[kind]++;
}

void noteLaunch(const char* kernel, const unsigned grid[3], const unsigned block[3], size_t argBytes) {
  FakeCudaLaunch l{};
  std::snprintf(l.kernel, sizeof l.kernel, "%s", kernel);
  std::copy(grid, grid + 3, l.grid);
  std::copy(block, block + 3, l.block);
  l.argBytes = argBytes;
  CallLog& log = callLog();
  std::lock_guard<std::mutex> g(log.mu);
  log.queued[FAKE_CUDA_QUEUED_LAUNCH]++;
  if (log.launches.size() < kKeptEntries) log.launches.push_back(l);
}

void noteCopy(uintptr_t dst, uintptr_t src, size_t bytes, bool async) {
  FakeCudaCopy c{};
  c.direction = (onDevice(src) ? 2 : 0) + (onDevice(dst) ? 1 : 0);
  c.bytes = bytes;
  c.async = async ? 1 : 0;
  CallLog& log = callLog();
  std::lock_guard<std::mutex> g(log.mu);
  log.queued[FAKE_CUDA_QUEUED_MEMCPY]++;
  if (log.copies.size() < kKeptEntries) log.copies.push_back(c);
}

}  // namespace fakecuda

using namespace fakecuda;

FAKE_CUDA_API void fakeCudaLogReset(void) {
  CallLog& log = callLog();
  std::lock_guard<std::mutex> g(log.mu);
  log.calls.clear();
  std::fill(std::begin(log.queued), std::end(log.queued), 0ULL);
  log.launches.clear();
  log.copies.clear();
}

FAKE_CUDA_API unsigned long long fakeCudaDriverCalls(const char* entry) {
  CallLog& log = callLog();
  std::lock_guard<std::mutex> g(log.mu);
  unsigned long long n = 0;
  for (const auto& [name, count] : log.calls)
    if (entry == nullptr || withoutVersion(name.c_str()) == withoutVersion(entry)) n += count;
  return n;
}

FAKE_CUDA_API unsigned long long fakeCudaQueued(int kind) {
  if (kind < 0 || kind >= FAKE_CUDA_QUEUED_KINDS) return 0;
  CallLog& log = callLog();
  std::lock_guard<std::mutex> g(log.mu);
  return log.queued[kind];
}

FAKE_CUDA_API int fakeCudaLaunchAt(unsigned long long i, FakeCudaLaunch* out) {
  CallLog& log = callLog();
  std::lock_guard<std::mutex> g(log.mu);
  if (out == nullptr || i >= log.launches.size()) return -1;
  *out = log.launches[i];
  return 0;
}

FAKE_CUDA_API int fakeCudaCopyAt(unsigned long long i, FakeCudaCopy* out) {
  CallLog& log = callLog();
  std::lock_guard<std::mutex> g(log.mu);
  if (out == nullptr || i >= log.copies.size()) return -1;
  *out = log.copies[i];
  return 0;
}
