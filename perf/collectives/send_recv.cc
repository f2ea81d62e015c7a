// SendRecv: a ring exchange, each rank sends to rank+1 and receives from rank-1 in one group.
// The redop column shows -o although no reduction happens (as nccl-tests prints it).
#include "collectives/registry.h"

namespace accl::perf {
namespace {

class SendRecv final : public Collective {
 public:
  const char* name() const override { return "sendrecv_perf"; }
  Layout layout(size_t bytes, size_t elemSize, int, int) const override {
    return wholeBufferLayout(bytes, elemSize);
  }
  double busBwFactor(int) const override { return 1.0; }
  ncclResult_t call(const CallArgs& a, int) const override {
    const int next = (a.rank + 1) % a.nranks, prev = (a.rank + a.nranks - 1) % a.nranks;
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) r = ncclSend(a.send, a.count, a.type, next, a.comm, a.stream);
    if (r == ncclSuccess) r = ncclRecv(a.recv, a.count, a.type, prev, a.comm, a.stream);
    const ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  }
  double expected(const DataPattern& p, const Layout&, int rank, int n, int, size_t i) const override {
    return p.input((rank + n - 1) % n, i);
  }
  bool loopsOverOps() const override { return true; }
  RedopColumn redopColumn() const override { return RedopColumn::kOpName; }
};

}  // namespace

const Collective& sendRecvCollective() {
  static const SendRecv instance;
  return instance;
}

}  // namespace accl::perf
