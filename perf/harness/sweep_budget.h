// sweep_budget.h: --time-budget, the sizes of a sweep that fit in a number of seconds. A GPU
// check has minutes, not hours: the speed runs go up in size only while the next row is
// predicted to fit, and report the largest size they reached. Every rank decides from the same
// numbers (the rows' times, already combined across ranks), so all stop at the same size
// without exchanging a word.
#pragma once
#include <cstddef>
#include <string>

namespace accl::perf {

class SweepBudget {
 public:
  explicit SweepBudget(double seconds) : budgetSec_(seconds) {}
  bool active() const { return budgetSec_ > 0; }
  // Whether a row at `bytes` is predicted to fit in what is left: the last row's cost, scaled
  // up by the size ratio (never down: small rows cost their latency).
  bool allows(size_t bytes) const;
  // A measured row: `calls` collectives of `bytes` at `secondsPerCall` each (summed over the
  // row's out-of-place and in-place halves by the caller).
  void record(size_t bytes, double rowSeconds);
  double spent() const { return spentSec_; }
  double predicted(size_t bytes) const;
  // The "# ..." line printed when the sweep stops early.
  std::string stopNote(size_t bytes) const;

 private:
  double budgetSec_;
  double spentSec_ = 0;
  size_t lastBytes_ = 0;
  double lastSec_ = 0;
  bool any_ = false;
};

}  // namespace accl::perf
