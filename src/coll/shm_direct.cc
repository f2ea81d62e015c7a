// ShmDirect: small all-reduces and all-gathers among ranks that all share memory. One step:
// post the input on the board (transports/board.h) and read every rank's input from there,
// so an operation costs one synchronisation whatever the rank count, where recursive
// doubling needs log2(n) round trips and a ring 2(n-1) hops.
#include "coll/algorithms.h"

namespace accl {

namespace {
std::unique_ptr<StepSource> boardStep(const CollArgs& a, Step::Kind kind) {
  auto list = std::make_unique<StepList>();
  Step s = copyStep(a, a.dst, a.src, a.count * dev::typeSize(a.type));
  s.kind = kind;
  s.op = a.op;
  list->push(s);
  return list;
}
}  // namespace

std::unique_ptr<StepSource> makeShmDirectAllReduce(const CollArgs& a) { return boardStep(a, Step::Kind::BoardReduce); }
std::unique_ptr<StepSource> makeShmDirectAllGather(const CollArgs& a) { return boardStep(a, Step::Kind::BoardGather); }
std::unique_ptr<StepSource> makeShmSlicedAllReduce(const CollArgs& a) {
  return boardStep(a, Step::Kind::BoardSliceReduce);
}
std::unique_ptr<StepSource> makeShmReadAllGather(const CollArgs& a) { return boardStep(a, Step::Kind::BoardReadGather); }

}  // namespace accl
