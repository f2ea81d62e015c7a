// tuner.h: which algorithm runs an op. NCCL_ALGO is parsed with NCCL's grammar; its "Ring"
// maps to our ring/chain algorithms and "Tree" to our latency algorithms (recursive
// doubling, flat trees). "ShmDirect" (ours) is the shared-memory board for small all-reduces
// and all-gathers when every rank is on one host; "AllPairs" (ours) the one-hop all-reduce over
// connections (every rank sends its input to every peer and folds all of them in rank order).
// Other NCCL algorithm names are accepted but not implemented here.
#pragma once
#include <cstdint>
#include <string>
#include "nccl.h"
#include "coll/algo_policy.h"
#include "sched/op.h"

namespace accl {

enum class Algo { Ring, Tree, ShmDirect, AllPairs, HierRing };
// The all-reduce Tree's shapes (sched/cost_model.h picks one): recursive doubling, log2(N)
// rounds in which every rank exchanges the whole buffer (N log2(N) messages); a binomial tree,
// reduce to one rank then broadcast, 2 log2(N) levels but only 2(N-1) messages; or a flat
// tree, every rank to one root and back, two hops but 2(N-1) messages through the root.
// Doubling takes the fewest hops per message; the others win where ranks share too few cores
// for all of them to send at once (several pods on one machine), the flat one while the
// root's N-1 messages cost less than the levels it saves.
enum class TreeShape { Doubling, Binomial, Flat };
// Where the ranks are: hosts, and ranks on each host (0: hosts differ in rank count).
// accl-sim also describes pods (groups of hosts behind one uplink, oversubscribed by
// podOversub) and several NICs per host; a communicator at init knows only its hosts.
struct TopoShape {
  int hosts = 1;
  int ranksPerHost = 0;
  int pods = 1;
  int nicsPerHost = 1;
  double podOversub = 1;
  // The most ranks on one OS kernel and the cores they share (0: unknown, as many as needed).
  int kernelRanks = 0;
  int kernelCores = 0;
};
// Picks the algorithm for an op of `bytes` per rank on a communicator of n ranks.
// `boardBytes`: the slot size of the communicator's shared-memory board (0: none, e.g. ranks
// on several hosts or NCCL_SHM_DISABLE=1); ShmDirect runs any size through it in chunks.
// `boardReads`: the board can read every rank's input in place (Board::peersReadable).
// `shape` (optional): with ranks on several hosts, an all-reduce takes the cheapest of Ring,
// Tree and HierRing in the cost model (sched/cost_model.h); `why` (optional) says so.
Algo chooseAlgo(const AlgoPolicy& policy, OpKind kind, size_t bytes, int nranks, size_t boardBytes = 0,
                bool boardReads = false, const TopoShape* shape = nullptr, std::string* why = nullptr);
const char* algoName(Algo a);
const char* treeShapeName(TreeShape s);
// The shape an all-reduce Tree of `bytes` per rank runs in: ACCL_TREE_SHAPE when set, else
// across hosts the cost model's cheaper one (`shape` given), else recursive doubling.
TreeShape chooseTreeShape(size_t bytes, int nranks, const TopoShape* shape);
// Largest per-rank input of an all-reduce the tuner gives AllPairs on n ranks without a board
// (0: never). `overrideBytes` >= 0 (ACCL_ALL_PAIRS_BYTES) replaces the measured table.
size_t allPairsLimit(int nranks, int64_t overrideBytes);
// Largest per-rank input of an all-reduce the tuner gives the latency algorithm (Tree:
// recursive doubling) rather than the ring, on n ranks with or without a shared-memory board.
// `overrideBytes` >= 0 (ACCL_TREE_THRESHOLD) replaces the measured table.
size_t treeLimit(int nranks, bool board, int64_t overrideBytes);
// Largest per-rank input the tuner gives ShmDirect for an all-reduce or all-gather on n ranks
// (0 for other ops). `overrideBytes` >= 0 (ACCL_SHM_DIRECT_BYTES) replaces the measured table.
size_t shmDirectLimit(OpKind kind, int nranks, int64_t overrideBytes);
// Smallest per-rank input from which ShmDirect reads an all-gather's inputs in place (0: never;
// other ops: 0). `overrideBytes` >= 0 (ACCL_SHM_READ_BYTES) replaces the measured table.
size_t shmReadMin(OpKind kind, int nranks, int64_t overrideBytes);
// Whether a ShmDirect op of `bytes` per rank reads its inputs in place (board that can).
bool useShmRead(OpKind kind, size_t bytes, int nranks, bool boardReads);
// Smallest per-rank input from which a ShmDirect all-reduce folds in slices (each rank its
// 1/n of every input, then all gather the slices) instead of every rank folding everything
// (0: never; other ops: 0). `overrideBytes` >= 0 (ACCL_SHM_SLICE_BYTES) replaces the table.
size_t shmSliceMin(OpKind kind, int nranks, int64_t overrideBytes);
bool useShmSlices(OpKind kind, size_t bytes, int nranks);

}  // namespace accl
