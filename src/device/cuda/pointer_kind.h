// pointer_kind.h: where a user pointer lives, asked of the driver (cuPointerGetAttribute), so
// a CUDA communicator can reject host pointers and pointers of another device by name, and
// knows where its kernels reach the pointer.
//
// Device and managed allocations are remembered by the range the driver reports for them
// (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR/RANGE_SIZE): a collective on a buffer seen before asks
// the driver nothing (issue 41). A range is forgotten when memory is freed through ACCL
// (ncclMemFree, the backend's own frees). Frees ACCL does not see (the user's cudaFree) leave
// the range cached: the next allocation there is device memory too, and a cached answer that
// would refuse a buffer is asked of the driver again before it refuses (see fresh below).
// Host memory is never cached: registering and unregistering it are cheap and unseen.
#pragma once
#include "device/cuda/driver_api.h"

namespace accl::dev::cuda {

enum class PointerKind {
  Host,     // plain or pinned host memory: not usable by device kernels
  Device,   // device memory of `device`
  Managed,  // unified memory: usable by kernels of any device
};

struct PointerInfo {
  PointerKind kind = PointerKind::Host;
  int device = -1;      // for Device (and Managed when the driver says)
  bool known = false;   // the driver knows the memory (false: pageable host memory)
  bool cached = false;  // answered from the range cache, without asking the driver
};

const char* pointerKindName(PointerKind k);
// fresh: ask the driver even when the range is cached (and re-cache what it says).
PointerInfo pointerInfo(const DriverApi& api, const void* p, bool fresh = false);
// Memory at p (anywhere in its allocation) is being freed: forget its cached range.
void forgetPointerRange(const void* p);

}  // namespace accl::dev::cuda
