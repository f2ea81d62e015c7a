// test_hooks.cc: counters and peeks for test programs (declared in fake_cuda_test_api.h), so a
// test can tell that the backend really launched kernels or memory operations.
#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include "internal.h"

namespace fakecuda {
namespace {
std::atomic<unsigned long long> gMemops{0}, gMemcpys{0}, gKernels{0}, gLookups{0};
struct PerName {
  std::mutex mu;
  std::map<std::string, unsigned long long> runs;
};
PerName& perName() {
  static PerName* p = new PerName;
  return *p;
}
}  // namespace

void countKernel(const char* name) {
  gKernels++;
  std::lock_guard<std::mutex> g(perName().mu);
  perName().runs[name]++;
}
void countMemop() { gMemops++; }
void countFunctionLookup() { gLookups++; }
void countMemcpy() { gMemcpys++; }

}  // namespace fakecuda

using namespace fakecuda;

FAKE_CUDA_API int fakeCudaIsFake(void) { return 1; }

FAKE_CUDA_API unsigned long long fakeCudaKernelRuns(const char* name) {
  if (name == nullptr) return gKernels.load();
  std::lock_guard<std::mutex> g(perName().mu);
  auto it = perName().runs.find(name);
  return it == perName().runs.end() ? 0 : it->second;
}

FAKE_CUDA_API unsigned long long fakeCudaMemopRuns(void) { return gMemops.load(); }
FAKE_CUDA_API unsigned long long fakeCudaFunctionLookups(void) { return gLookups.load(); }
FAKE_CUDA_API unsigned long long fakeCudaMemcpyRuns(void) { return gMemcpys.load(); }

FAKE_CUDA_API int fakeCudaPeek(void* dst, unsigned long long src, size_t bytes) {
  const char* p = kernelAddress(src, bytes);
  if (p == nullptr) return -1;
  std::memcpy(dst, p, bytes);
  return 0;
}

FAKE_CUDA_API unsigned long long fakeCudaRegisteredHostBytes(void) { return registeredHostBytes(); }

FAKE_CUDA_API unsigned long long fakeCudaFreesWhileOpen(void) { return freesWhileOpen(); }

FAKE_CUDA_API int fakeCudaIsDevicePointer(const void* p) {
  MemKind k = findRange(reinterpret_cast<uintptr_t>(p)).kind;
  return k == MemKind::Device || k == MemKind::Imported;
}
