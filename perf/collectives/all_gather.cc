// AllGather: rank r's block lands at r*count on every rank; in place, each rank's input
// already sits at its own block of the receive buffer.
#include "collectives/registry.h"

namespace accl::perf {
namespace {

class AllGather final : public Collective {
 public:
  const char* name() const override { return "all_gather_perf"; }
  Layout layout(size_t bytes, size_t elemSize, int n, int rank) const override {
    return gatheredLayout(bytes, elemSize, n, rank);
  }
  double busBwFactor(int n) const override { return double(n - 1) / n; }
  ncclResult_t call(const CallArgs& a, int) const override {
    return ncclAllGather(a.send, a.recv, a.count, a.type, a.comm, a.stream);
  }
  double expected(const DataPattern& p, const Layout& l, int, int, int, size_t i) const override {
    return p.input(static_cast<int>(i / l.count), i % l.count);
  }
};

}  // namespace

const Collective& allGatherCollective() {
  static const AllGather instance;
  return instance;
}

}  // namespace accl::perf
