// kernels.cc: modules and the kernels of kernels/cuda/device_kernels.cu, run on the host.
// cuModuleLoadData takes any image (the real fatbin is passed); cuModuleGetFunction knows the
// fatbin's entry points by name; cuLaunchKernel unpacks `params` with the kernel's signature
// and queues a host run of the same arithmetic (kernels/host) on the shadow addresses. A
// kernel that touches host memory the driver does not know faults: the stream's sticky
// CUDA_ERROR_ILLEGAL_ADDRESS and a stderr line naming the address. Grid and block are ignored.
#include <sched.h>
#include <cstring>
#include <string>
#include "device.h"
#include "internal.h"

namespace fakecuda {
namespace {

enum class KernelKind { Reduce2, Scale, Divide, Copy, WriteFlag, WaitFlag };

struct Kernel {
  std::string name;
  KernelKind kind;
  ncclDataType_t type = ncclInt8;
  accl::dev::RedKind op = accl::dev::RedKind::Sum;
};

struct Module {
  Context* ctx;
};

const char* const kOpNames[4] = {"sum", "prod", "max", "min"};

// Built once, never resized: a CUfunction is the address of an entry.
const std::vector<Kernel>& kernelTable() {
  static const std::vector<Kernel>* table = [] {
    auto* t = new std::vector<Kernel>;
    for (int type = 0; type < ncclNumTypes; type++) {
      const auto dt = static_cast<ncclDataType_t>(type);
      const std::string tn = accl::dev::typeName(dt);  // the library's spelling, as in the kernels' names
      for (int op = 0; op < 4; op++)
        t->push_back({"accl_reduce2_" + tn + "_" + kOpNames[op], KernelKind::Reduce2, dt, static_cast<accl::dev::RedKind>(op)});
      t->push_back({"accl_scale_" + tn, KernelKind::Scale, dt});
      t->push_back({"accl_divide_" + tn, KernelKind::Divide, dt});
    }
    t->push_back({"accl_copy", KernelKind::Copy});
    t->push_back({"accl_write_flag", KernelKind::WriteFlag});
    t->push_back({"accl_wait_flag", KernelKind::WaitFlag});
    return t;
  }();
  return *table;
}

const Kernel* asKernel(CUfunction f) {
  const auto& t = kernelTable();
  const Kernel* k = reinterpret_cast<const Kernel*>(f);
  return k >= t.data() && k < t.data() + t.size() ? k : nullptr;
}

Registry<Module>& modules() {
  static Registry<Module>* r = new Registry<Module>;
  return *r;
}

template <class T>
T arg(void** params, int i) {
  T v;
  std::memcpy(&v, params[i], sizeof v);
  return v;
}

// The kernel's view of [addr, addr+bytes), or nullptr after reporting the fault.
char* reach(const Kernel& k, uintptr_t addr, size_t bytes) {
  char* p = kernelAddress(addr, bytes);
  if (p == nullptr)
    report("kernel %s: illegal address 0x%lx (%zu bytes): neither device memory nor registered/cuMemHostAlloc'd "
           "host memory (CUDA_ERROR_ILLEGAL_ADDRESS)",
           k.name.c_str(), addr, bytes);
  return p;
}

// Arguments copied now (as the driver does at launch); addresses resolved when the kernel runs.
Op kernelOp(const Kernel& k, void** params) {
  const Kernel* kp = &k;
  switch (k.kind) {
    case KernelKind::Reduce2: {
      auto d = arg<uintptr_t>(params, 0), a = arg<uintptr_t>(params, 1), b = arg<uintptr_t>(params, 2);
      auto n = arg<size_t>(params, 3);
      return work([kp, d, a, b, n] {
        const size_t bytes = n * accl::dev::typeSize(kp->type);
        char *pd = reach(*kp, d, bytes), *pa = reach(*kp, a, bytes), *pb = reach(*kp, b, bytes);
        if (!pd || !pa || !pb) return CUDA_ERROR_ILLEGAL_ADDRESS;
        accl::dev::reduce2(kp->type, kp->op, pd, pa, pb, n);
        return CUDA_SUCCESS;
      });
    }
    case KernelKind::Scale: {
      auto d = arg<uintptr_t>(params, 0), s = arg<uintptr_t>(params, 1), scalar = arg<uintptr_t>(params, 2);
      auto n = arg<size_t>(params, 3);
      return work([kp, d, s, scalar, n] {
        const size_t es = accl::dev::typeSize(kp->type);
        char *pd = reach(*kp, d, n * es), *ps = reach(*kp, s, n * es), *pk = reach(*kp, scalar, es);
        if (!pd || !ps || !pk) return CUDA_ERROR_ILLEGAL_ADDRESS;
        accl::dev::scale(kp->type, pd, ps, pk, n);
        return CUDA_SUCCESS;
      });
    }
    case KernelKind::Divide: {
      auto d = arg<uintptr_t>(params, 0), s = arg<uintptr_t>(params, 1);
      auto divisor = arg<int>(params, 2);
      auto n = arg<size_t>(params, 3);
      return work([kp, d, s, divisor, n] {
        const size_t bytes = n * accl::dev::typeSize(kp->type);
        char *pd = reach(*kp, d, bytes), *ps = reach(*kp, s, bytes);
        if (!pd || !ps) return CUDA_ERROR_ILLEGAL_ADDRESS;
        accl::dev::divide(kp->type, pd, ps, divisor, n);
        return CUDA_SUCCESS;
      });
    }
    case KernelKind::Copy: {
      auto d = arg<uintptr_t>(params, 0), s = arg<uintptr_t>(params, 1);
      auto bytes = arg<size_t>(params, 2);
      return work([kp, d, s, bytes] {
        char *pd = reach(*kp, d, bytes), *ps = reach(*kp, s, bytes);
        if (!pd || !ps) return CUDA_ERROR_ILLEGAL_ADDRESS;
        std::memmove(pd, ps, bytes);
        return CUDA_SUCCESS;
      });
    }
    case KernelKind::WriteFlag: {
      auto flag = arg<uintptr_t>(params, 0);
      auto value = arg<unsigned long long>(params, 1);
      return work([kp, flag, value] {
        auto* f = reinterpret_cast<unsigned long long*>(reach(*kp, flag, 8));
        if (!f) return CUDA_ERROR_ILLEGAL_ADDRESS;
        __atomic_store_n(f, value, __ATOMIC_RELEASE);
        return CUDA_SUCCESS;
      });
    }
    case KernelKind::WaitFlag: {
      auto flag = arg<uintptr_t>(params, 0);
      auto value = arg<unsigned long long>(params, 1);
      auto equal = arg<int>(params, 2);
      return work([kp, flag, value, equal] {
        auto* f = reinterpret_cast<unsigned long long*>(reach(*kp, flag, 8));
        if (!f) return CUDA_ERROR_ILLEGAL_ADDRESS;
        for (;;) {
          const unsigned long long seen = __atomic_load_n(f, __ATOMIC_ACQUIRE);
          if (equal ? seen == value : static_cast<long long>(seen - value) >= 0) break;
          sched_yield();
        }
        return CUDA_SUCCESS;
      });
    }
  }
  return work([] { return CUDA_ERROR_UNKNOWN; });
}

}  // namespace
}  // namespace fakecuda

using namespace fakecuda;

FAKE_CUDA_API CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = currentContext(&ctx)) return r;
  auto* m = new Module{ctx};
  modules().add(m);
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuModuleUnload(CUmodule module) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  auto* m = reinterpret_cast<Module*>(module);
  if (!modules().remove(m)) return CUDA_ERROR_INVALID_HANDLE;
  delete m;
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuModuleGetFunction(CUfunction* fn, CUmodule module, const char* name) {
  if (fn == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!modules().contains(module)) return CUDA_ERROR_INVALID_HANDLE;
  for (const Kernel& k : kernelTable()) {
    if (k.name == name) {
      *fn = reinterpret_cast<CUfunction>(const_cast<Kernel*>(&k));
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

FAKE_CUDA_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                      unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                      unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  (void)sharedMemBytes;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  const Kernel* k = asKernel(f);
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
  // Counted when it runs, so each replay of a captured launch counts.
  s->enqueue([k, body = kernelOp(*k, kernelParams)](CUresult sticky) {
    if (sticky == CUDA_SUCCESS) countKernel(k->name.c_str());
    return body(sticky);
  });
  return CUDA_SUCCESS;
}

FAKE_CUDA_API CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
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
                                                                   size_t dynamicSMemSize) {
  (void)dynamicSMemSize;
  if (numBlocks == nullptr || blockSize <= 0 || blockSize > 1024) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (asKernel(func) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *numBlocks = 2048 / blockSize;
  return CUDA_SUCCESS;
}
