#include "sched/direct_wait.h"
#include <unistd.h>
#include "base/param.h"

namespace accl {
namespace {

int onlineCores() {
  static const int n = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return n > 0 ? n : 1;
}

}  // namespace

DirectWaitBudget directWaitBudget(const Comm& c, int64_t spinWhenCoresFree) {
  const bool oversubscribed = c.localRankCount() > onlineCores();
  int64_t spin = param::directSpinUsec();
  if (spin < 0) spin = oversubscribed ? 0 : spinWhenCoresFree;
  return {spin, spin + waitYieldUsec(oversubscribed, c.localRankCount() < c.nranks), oversubscribed};
}

int64_t waitYieldUsec(bool oversubscribed, bool spansHosts) {
  const int64_t yield = param::yieldUsec();
  if (yield >= 0) return yield;
  return oversubscribed || spansHosts ? 2000 : 50;
}

}  // namespace accl
