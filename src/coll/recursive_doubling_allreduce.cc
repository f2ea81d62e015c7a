// Recursive-doubling all-reduce: log2(n) exchange rounds, each rank sending its whole
// partial result to partner rank^mask and reducing what comes back. For n not a power of
// two, the first 2*rem ranks pair up first (even sends to odd) and get the result back at
// the end. Partners reduce x OP y and y OP x, which are equal for every built-in op, so all
// ranks end bit-identical. Both partners send before receiving, so the message must fit in
// a channel: the tuner only picks this for small messages.
#include "coll/algorithms.h"

namespace accl {

std::unique_ptr<StepSource> makeRecursiveDoublingAllReduce(const CollArgs& a) {
  auto list = std::make_unique<StepList>();
  const int n = a.nranks, r = a.rank;
  const size_t bytes = a.count * dev::typeSize(a.type);
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const int rem = n - pow2;

  // The partial result: the input until the first exchange has reduced into dst, so an
  // out-of-place call never copies its input to its output first.
  const char* partial = a.src;
  int vrank;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      list->push(sendStep(a, r + 1, a.src, bytes));
      list->push(recvStep(a, r + 1, a.dst, bytes));
      return list;
    }
    list->push(recvReduceStep(a, r - 1, a.dst, a.src, bytes));
    partial = a.dst;
    vrank = r / 2;
  } else {
    vrank = r - rem;
  }
  for (int mask = 1; mask < pow2; mask <<= 1) {
    int pv = vrank ^ mask;
    int partner = pv < rem ? pv * 2 + 1 : pv + rem;
    list->push(sendStep(a, partner, partial, bytes));
    list->push(recvReduceStep(a, partner, a.dst, partial, bytes));
    partial = a.dst;
  }
  if (partial != a.dst) list->push(copyStep(a, a.dst, a.src, bytes));  // one rank: no exchange ran
  if (r < 2 * rem) list->push(sendStep(a, r - 1, a.dst, bytes));
  return list;
}

}  // namespace accl
