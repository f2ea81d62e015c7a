// Broadcast: the root's buffer reaches every rank; busbw factor 1 (bound by the root's link).
#include "collectives/registry.h"

namespace accl::perf {
namespace {

class Broadcast final : public Collective {
 public:
  const char* name() const override { return "broadcast_perf"; }
  Layout layout(size_t bytes, size_t elemSize, int, int) const override {
    return wholeBufferLayout(bytes, elemSize);
  }
  double busBwFactor(int) const override { return 1.0; }
  ncclResult_t call(const CallArgs& a, int) const override {
    return ncclBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
  }
  double expected(const DataPattern& p, const Layout&, int, int, int root, size_t i) const override {
    return p.input(root, i);
  }
  bool hasRoot() const override { return true; }
};

}  // namespace

const Collective& broadcastCollective() {
  static const Broadcast instance;
  return instance;
}

}  // namespace accl::perf
