// kernels.cc: modules and kernel launches. The kernels are the emulated build of
// kernels/device_kernels.h (kernels/emulated): the library's own kernel code, compiled for the
// CPU and registered by name. cuModuleLoadData takes any image (the real fatbin is passed);
// cuModuleGetFunction knows every kernel of that build by name (and says so on stderr for one it
// does not); cuLaunchKernel copies the arguments and, when the stream gets there, runs the grid
// (blocks as host threads, threads as fibers, barriers real). Pointer arguments and pointers a
// kernel reads from memory are reached through the fake's address map: a kernel that touches
// host memory the driver does not know, or makes a misaligned 16-byte access, faults: the
// stream's sticky error and a stderr line naming the kernel and the address.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_set>
#include "emulated/grid.h"
#include "emulated/kernel_registry.h"
#include "internal.h"

// The emulated kernels reach memory through this (declared in kernels/portable.h).
void* accl::kern::hostView(const void* p) {
  char* v = fakecuda::kernelAddress(reinterpret_cast<uintptr_t>(p), 1);
  if (v == nullptr) {
    char what[160];
    std::snprintf(what, sizeof what,
                  "illegal address %p: neither device memory nor registered/cuMemHostAlloc'd host memory", p);
    throw Fault{Fault::IllegalAddress, what};
  }
  return v;
}

namespace accl::kern::direct {
// Declared weak in kernels/direct_kernel.h, which the emulated kernels call through.
void notePayload(const void* p, uint64_t bytes, int store);
}  // namespace accl::kern::direct

namespace {
// Payload bytes the emulated kernels said they moved (accl::kern::direct::notePayload): [store][kind],
// kind 0 device memory, 1 imported (CUDA IPC), 2 host memory the device reaches.
std::atomic<unsigned long long> gPayloadBytes[2][3];
}  // namespace

void accl::kern::direct::notePayload(const void* p, uint64_t bytes, int store) {
  const fakecuda::Range r = fakecuda::findRange(reinterpret_cast<uintptr_t>(p));
  const int kind = r.kind == fakecuda::MemKind::Device ? 0 : r.kind == fakecuda::MemKind::Imported ? 1 : 2;
  gPayloadBytes[store ? 1 : 0][kind].fetch_add(bytes, std::memory_order_relaxed);
}

FAKE_CUDA_API unsigned long long fakeCudaPayloadBytes(int kind, int store) {
  if (kind < 0 || kind > 2) return 0;
  return gPayloadBytes[store ? 1 : 0][kind].load(std::memory_order_relaxed);
}

FAKE_CUDA_API void fakeCudaPayloadReset(void) {
  for (auto& row : gPayloadBytes)
    for (auto& v : row) v.store(0, std::memory_order_relaxed);
}

namespace fakecuda {
namespace {

using accl::kern::EmulatedKernel;

struct Module {
  Context* ctx;
};

const EmulatedKernel* asKernel(CUfunction f) {
  static const auto* known = [] {
    auto* set = new std::unordered_set<const void*>;
    for (const std::string& n : accl::kern::kernelNames()) set->insert(accl::kern::findKernel(n.c_str()));
    return set;
  }();
  const auto* k = reinterpret_cast<const EmulatedKernel*>(f);
  return known->count(k) ? k : nullptr;
}

Registry<Module>& modules() {
  static Registry<Module>* r = new Registry<Module>;
  return *r;
}

}  // namespace
}  // namespace fakecuda

using namespace fakecuda;

FAKE_CUDA_API CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  noteCall("cuModuleLoadData");
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  if (CUresult r = refuseIfCaptureForbids("cuModuleLoadData")) return r;
  auto* m = new Module{ctx};
  modules().add(m);
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuModuleUnload(CUmodule module) {
  noteCall("cuModuleUnload");
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (CUresult r = refuseIfCaptureForbids("cuModuleUnload")) return r;
  auto* m = reinterpret_cast<Module*>(module);
  if (!modules().remove(m)) return CUDA_ERROR_INVALID_HANDLE;
  delete m;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuModuleGetFunction(CUfunction* fn, CUmodule module, const char* name) {
  noteCall("cuModuleGetFunction");
  if (fn == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!modules().contains(module)) return CUDA_ERROR_INVALID_HANDLE;
  countFunctionLookup();
  if (const EmulatedKernel* k = accl::kern::findKernel(name)) {
    if (CUresult r = loadFunction(reinterpret_cast<Module*>(module)->ctx, name)) return r;  // lazy loading
    *fn = reinterpret_cast<CUfunction>(const_cast<EmulatedKernel*>(k));
    return CUDA_SUCCESS;
  }
  report("cuModuleGetFunction: no kernel named %s in the module (kernels/device_kernels.h has none by that name)",
         name);
  return CUDA_ERROR_NOT_FOUND;
}

FAKE_CUDA_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                      unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                      unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) { noteCall("cuLaunchKernel");
  (void)sharedMemBytes;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  const EmulatedKernel* k = asKernel(f);
  if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (gridDimX == 0 || gridDimY == 0 || gridDimZ == 0 || blockDimX == 0 || blockDimY == 0 || blockDimZ == 0 ||
      blockDimX * blockDimY * blockDimZ > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (kernelParams == nullptr) {
    if (extra != nullptr) report("cuLaunchKernel: `extra` argument buffers are not emulated; pass kernelParams");
    return CUDA_ERROR_INVALID_VALUE;
  }
  Stream* s = nullptr;
  if (CUresult r = resolveStream(hStream, &s)) return r;
  FAKE_CUDA_TRACE("stream %p: launch %s", static_cast<void*>(s), k->name.c_str());
  const unsigned grid = gridDimX * gridDimY * gridDimZ, block = blockDimX * blockDimY * blockDimZ;
  const unsigned gridDims[3] = {gridDimX, gridDimY, gridDimZ}, blockDims[3] = {blockDimX, blockDimY, blockDimZ};
  noteLaunch(k->name.c_str(), gridDims, blockDims, k->argBytes);
  // Counted when it runs, so each replay of a captured launch counts.
  s->enqueue(work([k, grid, block, launch = k->bind(kernelParams)] {
    operationStarted();  // a running kernel does not hold its hardware queue
    countKernel(k->name.c_str());
    if (auto fault = accl::kern::runGrid(grid, block, launch)) {
      const bool misaligned = fault->kind == accl::kern::Fault::MisalignedAddress;
      report("kernel %s: %s (%s)", k->name.c_str(), fault->what.c_str(),
             misaligned ? "CUDA_ERROR_MISALIGNED_ADDRESS" : "CUDA_ERROR_ILLEGAL_ADDRESS");
      return misaligned ? CUDA_ERROR_MISALIGNED_ADDRESS : CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    return CUDA_SUCCESS;
  }));
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
  noteCall("cuFuncGetAttribute");
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (asKernel(hfunc) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; return CUDA_SUCCESS;
    default:
      if (attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
      *pi = 0;
      return CUDA_SUCCESS;
  }
}

FAKE_CUDA_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, CUfunction func, int blockSize,
                                                                   size_t dynamicSMemSize) { noteCall("cuOccupancyMaxActiveBlocksPerMultiprocessor");
  (void)dynamicSMemSize;
  if (numBlocks == nullptr || blockSize <= 0 || blockSize > 1024) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (asKernel(func) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *numBlocks = 2048 / blockSize;
  return CUDA_SUCCESS;
}
