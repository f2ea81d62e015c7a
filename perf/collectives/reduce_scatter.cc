// ReduceScatter: rank r receives the reduction of block r; in place, the result region is
// block r of the (full-size) input buffer.
#include "collectives/registry.h"

namespace accl::perf {
namespace {

class ReduceScatter final : public Collective {
 public:
  const char* name() const override { return "reduce_scatter_perf"; }
  Layout layout(size_t bytes, size_t elemSize, int n, int rank) const override {
    return scatteredLayout(bytes, elemSize, n, rank);
  }
  double busBwFactor(int n) const override { return double(n - 1) / n; }
  ncclResult_t call(const CallArgs& a, int) const override {
    return ncclReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
  }
  double expected(const DataPattern& p, const Layout& l, int rank, int, int, size_t i) const override {
    return p.reduced(l.count * rank + i);
  }
  bool loopsOverOps() const override { return true; }
  bool reduces() const override { return true; }
  RedopColumn redopColumn() const override { return RedopColumn::kOpName; }
};

}  // namespace

const Collective& reduceScatterCollective() {
  static const ReduceScatter instance;
  return instance;
}

}  // namespace accl::perf
