// plan_sim.h: runs every rank's plan of one collective (the phases the planner gives a lane,
// sched/coll_plan.h) against a link model, without data: what accl-sim predicts with. Each
// rank's lane runs its steps in order, as the executor does; a step that receives waits for
// its bytes to arrive, and messages between hosts queue on the NICs (and pod uplinks) they
// cross. Model, per step of b bytes:
//   * the receiving rank makes one pass over the bytes it receives (copy out of the channel,
//     or the reduction), at the host's copy or reduction rate (cost_model.h: copyGbps,
//     reduceGbps), overlapped with their arrival; a local copy or reduction likewise; a send
//     hands its source to the channel (no pass);
//   * a message inside a host arrives the intra-host latency after the sender started it,
//     streaming at the sender's pace;
//   * a message between hosts leaves through the sending rank's NIC (rank's slot on its host
//     modulo the NICs per host), then through the pod's uplink when it leaves the pod (its
//     hosts' NICs divided by the oversubscription), enters through the receiver's NIC, each
//     busy b / bandwidth in turn, and arrives the inter-host (or inter-pod) latency later;
//   * channels never fill (no back-pressure) and a step has no fixed CPU cost.
// It counts the bytes every host sends and receives through its NICs and every pod through its
// uplink, and checks that every byte sent is received (a plan that deadlocks or leaves bytes
// behind is reported as such).
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "sched/cost_model.h"
#include "sched/op.h"
#include "sched/tuner.h"
#include "topo/rank_layout.h"

namespace accl {

struct SimCluster {
  topo::RankLayout layout;  // topo::layoutRanks of the placement: host and pod of every rank
  int nicsPerHost = 1;
  double podOversub = 1;
  LinkCosts links;
};

struct SimOp {
  OpKind kind = OpKind::AllReduce;
  Algo algo = Algo::Ring;
  size_t count = 0;  // elements, as the API call's count
  ncclDataType_t type = ncclFloat32;
  int root = 0;
  size_t pieceBytes = 512 << 10;      // the ring piece (init: 512 KiB when every peer is over the network)
  size_t treePieceBytes = 1 << 20;    // recursive doubling's largest message (half a channel)
  TreeShape treeShape = TreeShape::Doubling;  // the all-reduce Tree's shape (tuner.h)
};

struct SimResult {
  bool ok = false;
  std::string error;  // when !ok: a deadlock, bytes left in a channel, or the step budget spent
  double us = 0;      // when the last rank finished its last step
  uint64_t steps = 0;  // steps drawn from the plans, empty ones (which lanes skip) included
  std::vector<uint64_t> hostSent, hostRecv;  // bytes each host sent/received through its NICs
  std::vector<uint64_t> podSent;             // bytes each pod sent through its uplink
  uint64_t intraBytes = 0;                   // bytes moved between ranks of one host
};

// Runs op on every rank of `cluster`; stops with !ok after `maxSteps` steps in all.
SimResult simulatePlans(const SimCluster& cluster, const SimOp& op, uint64_t maxSteps = 200000000);

// The op of `bytes` per rank (the tuner's measure: the call's count x element size, float
// elements) with the piece sizes init gives a communicator of this layout: 512 KiB ring pieces
// and 2 MiB channels where every peer is on another host, else 128 KiB and 1 MiB.
// `tree`: the all-reduce Tree's shape (the tuner's: cheaperTreeShape).
SimOp simOpFor(OpKind kind, Algo algo, size_t bytes, const topo::RankLayout& layout,
               TreeShape tree = TreeShape::Doubling);

}  // namespace accl
