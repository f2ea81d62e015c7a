#include "sched/tuner.h"
#include "base/param.h"

namespace accl {

Algo chooseAlgo(const AlgoPolicy& policy, OpKind kind, size_t bytes, int nranks, size_t boardBytes) {
  int f;
  switch (kind) {
    case OpKind::Broadcast: f = 0; break;
    case OpKind::Reduce: f = 1; break;
    case OpKind::AllGather: f = 2; break;
    case OpKind::ReduceScatter: f = 3; break;
    case OpKind::AllReduce: f = 4; break;
    default: return Algo::Tree;
  }
  uint8_t allowed = policy.allowed[f];
  // ShmDirect: all-reduce and all-gather up to ACCL_SHM_DIRECT_BYTES per rank when the
  // communicator has a board (boardBytes: its slot size; 0 none); elsewhere not an option.
  const bool boardKind = (kind == OpKind::AllReduce || kind == OpKind::AllGather) && boardBytes > 0;
  if (boardKind && allowed == kAlgoShmDirect) return Algo::ShmDirect;  // forced: any size, in board-sized chunks
  if (boardKind && bytes <= static_cast<size_t>(param::shmDirectBytes()) && (allowed & kAlgoShmDirect))
    return Algo::ShmDirect;
  allowed &= kAlgoRing | kAlgoTree;
  if (allowed == 0) allowed = kAlgoRing | kAlgoTree;  // only ShmDirect allowed, and it cannot run
  if (allowed == kAlgoRing) return Algo::Ring;
  if (allowed == kAlgoTree) return Algo::Tree;
  // All-gather and reduce-scatter have no separate latency algorithm: the ring is it.
  if (kind == OpKind::AllGather || kind == OpKind::ReduceScatter) return Algo::Ring;
  if (nranks <= 2 && kind != OpKind::AllReduce) return Algo::Tree;  // a chain of two is a flat tree
  return bytes <= static_cast<size_t>(param::treeThreshold()) ? Algo::Tree : Algo::Ring;
}

const char* algoName(Algo a) {
  switch (a) {
    case Algo::Ring: return "Ring";
    case Algo::Tree: return "Tree";
    case Algo::ShmDirect: return "ShmDirect";
  }
  return "?";
}

}  // namespace accl
