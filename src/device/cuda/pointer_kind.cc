#include "device/cuda/pointer_kind.h"

namespace accl::dev::cuda {

const char* pointerKindName(PointerKind k) {
  switch (k) {
    case PointerKind::Host: return "host memory";
    case PointerKind::Device: return "device memory";
    case PointerKind::Managed: return "managed memory";
  }
  return "?";
}

PointerInfo pointerInfo(const DriverApi& api, const void* p) {
  PointerInfo info;
  const CUdeviceptr addr = reinterpret_cast<CUdeviceptr>(p);
  unsigned type = 0;
  // Pageable host memory the driver never saw is an error here (CUDA_ERROR_INVALID_VALUE):
  // that is host memory too.
  if (api.pointerGetAttribute(&type, kPointerAttributeMemoryType, addr) != kSuccess) return info;
  int ordinal = -1;
  if (api.pointerGetAttribute(&ordinal, kPointerAttributeDeviceOrdinal, addr) != kSuccess) ordinal = -1;
  info.device = ordinal;
  int managed = 0;
  if (api.pointerGetAttribute(&managed, kPointerAttributeIsManaged, addr) != kSuccess) managed = 0;
  if (managed || type == kMemoryTypeUnified) info.kind = PointerKind::Managed;
  else if (type == kMemoryTypeDevice) info.kind = PointerKind::Device;
  return info;
}

}  // namespace accl::dev::cuda
