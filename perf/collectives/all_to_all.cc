// AlltoAll: block p of rank r's input goes to block r of rank p's output.
#include "collectives/registry.h"

namespace accl::perf {
namespace {

class AllToAll final : public Collective {
 public:
  const char* name() const override { return "alltoall_perf"; }
  Layout layout(size_t bytes, size_t elemSize, int n, int) const override {
    Layout l;
    l.count = roundedPerRankCount(bytes, elemSize, n);
    l.sendElems = l.recvElems = l.count * n;
    l.sizeBytes = l.algBytes = l.recvElems * elemSize;
    return l;
  }
  double busBwFactor(int n) const override { return double(n - 1) / n; }
  ncclResult_t call(const CallArgs& a, int) const override {
    return ncclAlltoAll(a.send, a.recv, a.count, a.type, a.comm, a.stream);
  }
  double expected(const DataPattern& p, const Layout& l, int rank, int, int, size_t i) const override {
    const size_t peer = i / l.count;
    return p.input(static_cast<int>(peer), l.count * rank + i % l.count);
  }
};

}  // namespace

const Collective& allToAllCollective() {
  static const AllToAll instance;
  return instance;
}

}  // namespace accl::perf
