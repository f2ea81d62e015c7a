// cpu_mask.h: a set of CPUs (cpu_set_t) for placing ACCL's own threads: parsed from and
// printed as a list ("0-3,8"), intersected, read from and applied to the calling thread.
#pragma once
#include <pthread.h>
#include <sched.h>
#include <string>

namespace accl::topo {

class CpuMask {
 public:
  CpuMask() { CPU_ZERO(&set_); }
  // "0-3,8,10-11" (hwloc's and the kernel's list syntax); false on anything else.
  static bool parseList(const std::string& list, CpuMask* out);
  // The calling thread's affinity (empty if the kernel refuses to say).
  static CpuMask ofCurrentThread();

  void add(int cpu) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set_);
  }
  bool has(int cpu) const { return cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &set_); }
  int count() const { return CPU_COUNT(&set_); }
  bool empty() const { return count() == 0; }
  CpuMask intersect(const CpuMask& other) const;
  bool operator==(const CpuMask& other) const { return CPU_EQUAL(&set_, &other.set_); }
  std::string list() const;  // "0-3,8"; "" when empty

  // Binds the calling thread to these CPUs; an empty mask leaves it alone. False (errno set)
  // if the kernel refused.
  bool applyToCurrentThread() const;
  // The same for another thread (pthread_t of a std::thread's native_handle()).
  bool applyToThread(pthread_t thread) const;

 private:
  cpu_set_t set_;
};

}  // namespace accl::topo
