// Binomial-tree all-reduce: the ranks reduce into ring position 0 along a binomial tree, then
// it broadcasts the result back down the same tree. 2 log2(N) levels, twice recursive
// doubling's rounds, but 2(N-1) messages where doubling sends N log2(N): where the ranks share
// too few cores to send all at once, fewer messages finish sooner (sched/cost_model.cc). Every
// rank ends with position 0's bytes, so all are bit-identical. Positions follow the ring order
// (CollArgs::rankAt), so the lowest levels stay inside a host and each host sends one message
// per level across hosts. No rank sends and receives at once: any message size fits.
#include "coll/algorithms.h"

namespace accl {

std::unique_ptr<StepSource> makeBinomialTreeAllReduce(const CollArgs& a) {
  auto list = std::make_unique<StepList>();
  const int n = a.nranks, p = a.pos();
  const size_t bytes = a.count * dev::typeSize(a.type);
  // Reduce: at level `mask` the position p + mask sends its partial result to p, while p has
  // no bit at or below mask; the position with bit `mask` set sends and is done reducing.
  const char* partial = a.src;
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (p & mask) {
      list->push(sendStep(a, a.rankAt(p - mask), partial, bytes));
      break;
    }
    if (p + mask < n) {
      list->push(recvReduceStep(a, a.rankAt(p + mask), a.dst, partial, bytes));
      partial = a.dst;
    }
  }
  // Broadcast: the result comes from the parent, then goes to the children, farthest first
  // (they have the deepest subtrees).
  if (p != 0) {
    list->push(recvStep(a, a.rankAt(p - mask), a.dst, bytes));
  } else if (partial != a.dst) {
    list->push(copyStep(a, a.dst, a.src, bytes));  // one rank: nothing reduced into dst
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (p + mask < n) list->push(sendStep(a, a.rankAt(p + mask), a.dst, bytes));
  return list;
}

}  // namespace accl
