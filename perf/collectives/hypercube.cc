// Hypercube all-gather: log2(n) rounds; in round k a rank swaps everything its aligned group
// of 2^k ranks holds with the partner rank ^ 2^k. Rounds must finish in order, so each is its
// own phase (one group). algbw counts the (n-1) blocks a rank receives; busbw factor 1.
#include <algorithm>
#include <bit>

#include "collectives/registry.h"

namespace accl::perf {
namespace {

class Hypercube final : public Collective {
 public:
  const char* name() const override { return "hypercube_perf"; }
  Layout layout(size_t bytes, size_t elemSize, int n, int rank) const override {
    Layout l;
    l.count = roundedPerRankCount(bytes, elemSize, n);
    l.sendElems = l.count;
    l.recvElems = l.count * n;
    l.sizeBytes = l.recvElems * elemSize;
    l.algBytes = l.count * (n - 1) * elemSize;
    l.inPlaceSendOffset = l.count * rank;
    return l;
  }
  double busBwFactor(int) const override { return 1.0; }
  // One rank still runs phase 0: out of place, its input must reach its own block.
  int phases(int n) const override { return std::max(1, std::countr_zero(static_cast<unsigned>(n))); }
  std::string unsupportedReason(int n) const override {
    if (std::has_single_bit(static_cast<unsigned>(n))) return {};
    return "hypercube_perf needs a power-of-two number of ranks";
  }
  ncclResult_t call(const CallArgs& a, int phase) const override {
    const size_t blockBytes = a.count * elemBytes(a.type);
    auto* recv = static_cast<char*>(a.recv);
    const int mask = 1 << phase;
    const int peer = a.rank ^ mask;
    const int mine = a.rank & ~(mask - 1), theirs = peer & ~(mask - 1);
    const size_t blocks = static_cast<size_t>(mask);
    const bool exchanging = peer < a.nranks;  // false only for a single rank
    ncclResult_t r = ncclGroupStart();
    if (phase == 0) {
      // Round 0 sends the input; out of place it also has to reach this rank's own block.
      char* ownBlock = recv + blockBytes * a.rank;
      if (r == ncclSuccess && exchanging) r = ncclSend(a.send, a.count, a.type, peer, a.comm, a.stream);
      if (a.send != ownBlock) {
        if (r == ncclSuccess) r = ncclSend(a.send, a.count, a.type, a.rank, a.comm, a.stream);
        if (r == ncclSuccess) r = ncclRecv(ownBlock, a.count, a.type, a.rank, a.comm, a.stream);
      }
    } else if (r == ncclSuccess) {
      r = ncclSend(recv + blockBytes * mine, a.count * blocks, a.type, peer, a.comm, a.stream);
    }
    if (r == ncclSuccess && exchanging)
      r = ncclRecv(recv + blockBytes * theirs, a.count * blocks, a.type, peer, a.comm, a.stream);
    const ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  }
  double expected(const DataPattern& p, const Layout& l, int, int, int, size_t i) const override {
    return p.input(static_cast<int>(i / l.count), i % l.count);
  }
  RedopColumn redopColumn() const override { return RedopColumn::kEmpty; }

 private:
  static size_t elemBytes(ncclDataType_t type) { return typeSize(type); }
};

}  // namespace

const Collective& hypercubeCollective() {
  static const Hypercube instance;
  return instance;
}

}  // namespace accl::perf
