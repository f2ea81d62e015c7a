#include "device/cuda/kernel_names.h"
#include "device.h"

namespace accl::dev::cuda {

std::string kernelName(const char* stem, ncclDataType_t t) {
  return typeSize(t) ? std::string(stem) + typeName(t) : std::string();
}

std::vector<std::string> libraryKernelNames(bool withLl) {
  std::vector<std::string> names = {"accl_copy", "accl_staged"};
  for (int t = 0; t < ncclNumTypes; t++) {
    const auto type = static_cast<ncclDataType_t>(t);
    for (const char* op : {"_sum", "_prod", "_max", "_min"}) names.push_back(kernelName("accl_reduce2_", type) + op);
    names.push_back(kernelName("accl_scale_", type));
    names.push_back(kernelName("accl_divide_", type));
    for (const char* op : {"_sum", "_prod", "_max", "_min"}) names.push_back(kernelName("accl_coll_", type) + op);
    for (const char* op : {"_sum", "_prod", "_max", "_min"}) names.push_back(kernelName("accl_direct_", type) + op);
    if (withLl)
      for (const char* op : {"_sum", "_prod", "_max", "_min"}) names.push_back(kernelName("accl_ll_", type) + op);
  }
  return names;
}

}  // namespace accl::dev::cuda
