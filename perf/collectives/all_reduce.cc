// AllReduce: every rank ends with the reduction of all inputs; busbw factor 2(n-1)/n because
// an optimal algorithm (reduce-scatter + all-gather) moves 2(n-1)/n of the data per rank.
#include "collectives/registry.h"

namespace accl::perf {
namespace {

class AllReduce final : public Collective {
 public:
  const char* name() const override { return "all_reduce_perf"; }
  Layout layout(size_t bytes, size_t elemSize, int, int) const override {
    return wholeBufferLayout(bytes, elemSize);
  }
  double busBwFactor(int n) const override { return 2.0 * (n - 1) / n; }
  ncclResult_t call(const CallArgs& a, int) const override {
    return ncclAllReduce(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
  }
  double expected(const DataPattern& p, const Layout&, int, int, int, size_t i) const override {
    return p.reduced(i);
  }
  bool loopsOverOps() const override { return true; }
  bool reduces() const override { return true; }
  RedopColumn redopColumn() const override { return RedopColumn::kOpName; }
};

}  // namespace

const Collective& allReduceCollective() {
  static const AllReduce instance;
  return instance;
}

}  // namespace accl::perf
