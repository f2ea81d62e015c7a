#include "sweep_budget.h"

#include <algorithm>
#include <cstdio>

namespace accl::perf {

double SweepBudget::predicted(size_t bytes) const {
  if (!any_) return 0;
  const double ratio = static_cast<double>(std::max<size_t>(bytes, 1)) / static_cast<double>(std::max<size_t>(lastBytes_, 1));
  return lastSec_ * std::max(1.0, ratio);
}

bool SweepBudget::allows(size_t bytes) const {
  return !active() || !any_ || spentSec_ + predicted(bytes) <= budgetSec_;
}

void SweepBudget::record(size_t bytes, double rowSeconds) {
  spentSec_ += rowSeconds;
  lastBytes_ = bytes;
  lastSec_ = rowSeconds;
  any_ = true;
}

std::string SweepBudget::stopNote(size_t bytes) const {
  char line[200];
  std::snprintf(line, sizeof line,
                "# --time-budget %.3g s: stopped before %zu bytes (predicted %.3g s; %.3g s spent); largest size: %zu bytes",
                budgetSec_, bytes, predicted(bytes), spentSec_, lastBytes_);
  return line;
}

}  // namespace accl::perf
