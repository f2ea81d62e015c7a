// pointer_kind.h: where a user pointer lives, asked of the driver (cuPointerGetAttribute), so
// a CUDA communicator can reject host pointers and pointers of another device by name.
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
  int device = -1;  // for Device (and Managed when the driver says)
};

const char* pointerKindName(PointerKind k);
PointerInfo pointerInfo(const DriverApi& api, const void* p);

}  // namespace accl::dev::cuda
