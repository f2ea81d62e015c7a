// host_identity.cc: which ranks share a host. Boot id alone is not enough: two pods on one
// node share it but not their network namespace, and cannot share memory as one host.
#include <sched.h>
#include <sys/stat.h>
#include <algorithm>
#include <fstream>
#include <string>
#include "base/param.h"
#include "topo/ifaces.h"

namespace accl::topo {
namespace {

// This boot of the kernel; empty when it cannot be read.
std::string bootId() {
  std::string id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> id;
  return id;
}

// FNV-1a: stable across processes and builds (std::hash is not guaranteed to be).
uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace

std::string hostIdentity() {
  std::string override = param::hostId();
  if (!override.empty()) return override;
  struct stat st {};
  unsigned long long netns = stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 0;
  return bootId() + ":" + std::to_string(netns);
}

uint64_t hostHash() { return fnv1a(hostIdentity()); }

uint64_t kernelHash() {
  const std::string id = bootId();
  return id.empty() ? 0 : fnv1a(id);
}

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace accl::topo
