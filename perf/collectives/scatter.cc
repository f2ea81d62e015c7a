// Scatter: block r of the root's buffer goes to rank r; in place, rank r's result region is
// block r of its own (full-size) buffer.
#include "collectives/registry.h"

namespace accl::perf {
namespace {

class Scatter final : public Collective {
 public:
  const char* name() const override { return "scatter_perf"; }
  Layout layout(size_t bytes, size_t elemSize, int n, int rank) const override {
    return scatteredLayout(bytes, elemSize, n, rank);
  }
  double busBwFactor(int n) const override { return double(n - 1) / n; }
  ncclResult_t call(const CallArgs& a, int) const override {
    return ncclScatter(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
  }
  double expected(const DataPattern& p, const Layout& l, int rank, int, int root, size_t i) const override {
    return p.input(root, l.count * rank + i);
  }
  bool hasRoot() const override { return true; }
};

}  // namespace

const Collective& scatterCollective() {
  static const Scatter instance;
  return instance;
}

}  // namespace accl::perf
