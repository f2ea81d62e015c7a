// Gather: rank r's block lands at r*count on the root only.
#include "collectives/registry.h"

namespace accl::perf {
namespace {

class Gather final : public Collective {
 public:
  const char* name() const override { return "gather_perf"; }
  Layout layout(size_t bytes, size_t elemSize, int n, int rank) const override {
    return gatheredLayout(bytes, elemSize, n, rank);
  }
  double busBwFactor(int n) const override { return double(n - 1) / n; }
  ncclResult_t call(const CallArgs& a, int) const override {
    return ncclGather(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
  }
  double expected(const DataPattern& p, const Layout& l, int, int, int, size_t i) const override {
    return p.input(static_cast<int>(i / l.count), i % l.count);
  }
  bool checksRank(int rank, int root) const override { return rank == root; }
  bool hasRoot() const override { return true; }
};

}  // namespace

const Collective& gatherCollective() {
  static const Gather instance;
  return instance;
}

}  // namespace accl::perf
