// cost_model.h: predicted time of an all-reduce, all-gather or reduce-scatter per algorithm on
// a multi-host communicator, from the latency and bandwidth of two link classes (inside a
// host, between hosts). The tuner picks the cheapest allowed algorithm with it when ranks span
// hosts; accl-sim runs the plans themselves (sched/plan_sim.h) and shows the model's choice
// next to them. Figures: measuredLinks() (with the command).
#pragma once
#include <cstddef>
#include <string>
#include "sched/tuner.h"

namespace accl {

struct LinkCost {
  double latencyUs = 0;  // one step's fixed cost: a hand-off and its wake-up, one hop
  double gbytesPerSec = 1;  // one rank's (intra) or one host's (inter) sustained bandwidth
};
// inside a host; between hosts of one pod (bandwidth: one NIC); between pods (latency; the
// bandwidth is the NIC's, shared as TopoShape::podOversub says).
struct LinkCosts {
  LinkCost intra, inter;
  double podLatencyUs = 0;  // 0: as inter
  // Host reductions of buffers up to cacheBytes per rank stay in the CPU caches, and host
  // copies stream at that rate at any size: intraCachedGbps there (0: no such effect, every
  // pass at intra.gbytesPerSec).
  double cacheBytes = 0;
  double intraCachedGbps = 0;
  // One rank's CPU time to send or to receive one small message between hosts (0: unknown,
  // and the Tree's flat shape, whose root handles N-1 of them in turn, is not considered).
  double messageUs = 0;
};

// The figures measured on this project's pods (tests/netns), see cost_model.cc.
const LinkCosts& measuredLinks();
// The host's rate for a pass that copies, and for one that reduces when the buffers it
// touches hold `touchedBytes` per rank (GB/s).
double copyGbps(const LinkCosts& links);
double reduceGbps(const LinkCosts& links, double touchedBytes);
// Predicted microseconds of a collective of `bytes` per rank (the call's count x element
// size: an all-gather's input, a reduce-scatter's output) on n ranks; negative where the
// algorithm cannot run on this shape (HierRing needs the same number, > 1, of ranks on every
// host; all-gather and reduce-scatter have no Tree).
double predictUs(OpKind kind, Algo algo, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links);
double predictAllReduceUs(Algo algo, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links);
// The all-reduce Tree of one shape (predictAllReduceUs(Tree, ...) is the cheapest of them);
// negative where the model has no figure for it (Flat without LinkCosts::messageUs).
double predictTreeUs(TreeShape tree, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links);
// The cheapest shape of the all-reduce Tree (doubling on a tie: the fewest hops per message).
// `predictedUs` (optional): its predicted time.
TreeShape cheaperTreeShape(size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links,
                           double* predictedUs = nullptr);
// The cheapest of Tree, Ring and HierRing among `allowed` (AlgoBit set) for `kind`;
// `why` (optional): the shape and every prediction, for NCCL_DEBUG_SUBSYS=TUNING.
Algo cheapestAlgo(OpKind kind, uint8_t allowed, size_t bytes, int nranks, const TopoShape& shape,
                  const LinkCosts& links, std::string* why = nullptr);
Algo cheapestAllReduce(uint8_t allowed, size_t bytes, int nranks, const TopoShape& shape, const LinkCosts& links,
                       std::string* why = nullptr);

}  // namespace accl
