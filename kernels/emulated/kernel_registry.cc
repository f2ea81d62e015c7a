#include "emulated/kernel_registry.h"
#include <map>
#include <mutex>

namespace accl::kern {
namespace {

// Filled by static registrations before main; never resized afterwards.
std::map<std::string, EmulatedKernel>& table() {
  static auto* t = new std::map<std::string, EmulatedKernel>;
  return *t;
}

}  // namespace

void registerKernel(EmulatedKernel k) {
  std::string name = k.name;
  table().emplace(std::move(name), std::move(k));
}

const EmulatedKernel* findKernel(const char* name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> kernelNames() {
  std::vector<std::string> out;
  for (const auto& [name, k] : table()) out.push_back(name);
  return out;
}

}  // namespace accl::kern
