// cpu_mask.cc: CPU sets as lists, and the calling thread's affinity (see cpu_mask.h).
#include "topo/cpu_mask.h"
#include <pthread.h>
#include <cstdlib>

namespace accl::topo {

bool CpuMask::parseList(const std::string& list, CpuMask* out) {
  CpuMask m;
  size_t i = 0;
  auto number = [&](int* v) {
    if (i >= list.size() || list[i] < '0' || list[i] > '9') return false;
    long n = 0;
    while (i < list.size() && list[i] >= '0' && list[i] <= '9') {
      n = n * 10 + (list[i++] - '0');
      if (n >= CPU_SETSIZE) return false;
    }
    *v = static_cast<int>(n);
    return true;
  };
  while (i < list.size()) {
    int lo = 0, hi = 0;
    if (!number(&lo)) return false;
    hi = lo;
    if (i < list.size() && list[i] == '-') {
      i++;
      if (!number(&hi) || hi < lo) return false;
    }
    for (int c = lo; c <= hi; c++) m.add(c);
    if (i < list.size()) {
      if (list[i] != ',') return false;
      i++;
    }
  }
  *out = m;
  return true;
}

CpuMask CpuMask::ofCurrentThread() {
  CpuMask m;
  if (pthread_getaffinity_np(pthread_self(), sizeof(m.set_), &m.set_) != 0) CPU_ZERO(&m.set_);
  return m;
}

CpuMask CpuMask::intersect(const CpuMask& other) const {
  CpuMask r;
  CPU_AND(&r.set_, &set_, &other.set_);
  return r;
}

std::string CpuMask::list() const {
  std::string s;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!has(c)) continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && has(end + 1)) end++;
    s += (s.empty() ? "" : ",") + std::to_string(c) + (end > c ? "-" + std::to_string(end) : "");
    c = end;
  }
  return s;
}

bool CpuMask::applyToCurrentThread() const { return applyToThread(pthread_self()); }

bool CpuMask::applyToThread(pthread_t thread) const {
  if (empty()) return true;
  return pthread_setaffinity_np(thread, sizeof(set_), &set_) == 0;
}

}  // namespace accl::topo
