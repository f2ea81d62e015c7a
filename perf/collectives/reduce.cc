// Reduce: only the root holds the result (other ranks' receive buffers are not checked);
// busbw factor 1 (bound by the root's link).
#include "collectives/registry.h"

namespace accl::perf {
namespace {

class Reduce final : public Collective {
 public:
  const char* name() const override { return "reduce_perf"; }
  Layout layout(size_t bytes, size_t elemSize, int, int) const override {
    return wholeBufferLayout(bytes, elemSize);
  }
  double busBwFactor(int) const override { return 1.0; }
  ncclResult_t call(const CallArgs& a, int) const override {
    return ncclReduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm, a.stream);
  }
  double expected(const DataPattern& p, const Layout&, int, int, int, size_t i) const override {
    return p.reduced(i);
  }
  bool checksRank(int rank, int root) const override { return rank == root; }
  bool loopsOverOps() const override { return true; }
  bool reduces() const override { return true; }
  bool hasRoot() const override { return true; }
  RedopColumn redopColumn() const override { return RedopColumn::kOpName; }
};

}  // namespace

const Collective& reduceCollective() {
  static const Reduce instance;
  return instance;
}

}  // namespace accl::perf
