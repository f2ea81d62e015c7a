// Flat-tree ("direct") algorithms: the root talks to every rank itself. One hop of latency,
// so they win for small messages; gather and scatter are inherently this shape. Peers are
// visited in rank order, so the root's reduction order is fixed and results reproducible.
#include "coll/algorithms.h"

namespace accl {

std::unique_ptr<StepSource> makeDirectBroadcast(const CollArgs& a) {
  auto list = std::make_unique<StepList>();
  const size_t bytes = a.count * dev::typeSize(a.type);
  if (a.rank == a.root) {
    for (int p = 0; p < a.nranks; p++)
      if (p != a.root) list->push(sendStep(a, p, a.src, bytes));
    list->push(copyStep(a, a.dst, a.src, bytes));
  } else {
    list->push(recvStep(a, a.root, a.dst, bytes));
  }
  return list;
}

std::unique_ptr<StepSource> makeDirectReduce(const CollArgs& a) {
  auto list = std::make_unique<StepList>();
  const size_t bytes = a.count * dev::typeSize(a.type);
  if (a.rank == a.root) {
    const char* acc = a.src;  // the first reduction reads the input, later ones the output
    for (int p = 0; p < a.nranks; p++) {
      if (p == a.root) continue;
      list->push(recvReduceStep(a, p, a.dst, acc, bytes));
      acc = a.dst;
    }
  } else {
    list->push(sendStep(a, a.root, a.src, bytes));
  }
  return list;
}

std::unique_ptr<StepSource> makeDirectAllReduce(const CollArgs& a) {
  // Ring position 0 is the root: it folds every other position's input in position order and
  // sends the result back to each, so all ranks end bit-identical. A rank sends before it
  // receives, but only the root receives more than once, in order: any size streams through.
  auto list = std::make_unique<StepList>();
  const size_t bytes = a.count * dev::typeSize(a.type);
  const int root = a.rankAt(0);
  if (a.rank != root) {
    list->push(sendStep(a, root, a.src, bytes));
    list->push(recvStep(a, root, a.dst, bytes));
    return list;
  }
  const char* acc = a.src;
  for (int p = 1; p < a.nranks; p++) {
    list->push(recvReduceStep(a, a.rankAt(p), a.dst, acc, bytes));
    acc = a.dst;
  }
  if (acc != a.dst) list->push(copyStep(a, a.dst, a.src, bytes));  // one rank
  for (int p = 1; p < a.nranks; p++) list->push(sendStep(a, a.rankAt(p), a.dst, bytes));
  return list;
}

std::unique_ptr<StepSource> makeDirectGather(const CollArgs& a) {
  auto list = std::make_unique<StepList>();
  const size_t bytes = a.count * dev::typeSize(a.type);
  if (a.rank == a.root) {
    list->push(copyStep(a, a.dst + a.root * bytes, a.src, bytes));
    for (int p = 0; p < a.nranks; p++)
      if (p != a.root) list->push(recvStep(a, p, a.dst + p * bytes, bytes));
  } else {
    list->push(sendStep(a, a.root, a.src, bytes));
  }
  return list;
}

std::unique_ptr<StepSource> makeDirectScatter(const CollArgs& a) {
  auto list = std::make_unique<StepList>();
  const size_t bytes = a.count * dev::typeSize(a.type);
  if (a.rank == a.root) {
    for (int p = 0; p < a.nranks; p++)
      if (p != a.root) list->push(sendStep(a, p, a.src + p * bytes, bytes));
    list->push(copyStep(a, a.dst, a.src + a.root * bytes, bytes));
  } else {
    list->push(recvStep(a, a.root, a.dst, bytes));
  }
  return list;
}

}  // namespace accl
