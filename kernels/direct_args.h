// direct_args.h: what one launch of the direct kernel (kernels/direct_kernel.h) is told. The
// direct path serves ranks of one process whose devices reach each other: every rank's kernel
// loads its peers' inputs and stores into their outputs in place, with no mailbox slot between
// (k = 4 HBM bytes per payload byte for a 2-rank all-reduce, against 9 through the slots). It
// runs all-reduce, all-gather, reduce-scatter, broadcast and reduce.
//
// Per call, each rank's kernel (its own blocks, grid = entries x blocksPerRank) publishes its
// buffers and call in its MailboxHeader (DirectPost, directReady = call number), waits until
// every peer published the same call number, compares (a different call, count or type is a
// mismatch, reported like the stamps path; no peer buffer is touched), works on its slice, and
// its last block says directDone and waits for every peer's directDone before the kernel ends.
// The call number is the rank's own device counter (directCalls + 1), never a launch argument,
// so a captured launch replays with the right one.
#pragma once
#include <cstddef>
#include <cstdint>
#include "collective_args.h"

namespace accl::kern {

constexpr unsigned kDirectThreads = 512;

enum class DirectKind : uint8_t { AllReduce = 1, AllGather = 2, ReduceScatter = 3, Broadcast = 4, Reduce = 5 };

// One rank this launch runs (a launch carries several when one thread queued ranks of one
// communicator on one stream in a group).
struct DirectEntry {
  int32_t rank;
  ScalarKind scalarKind;
  alignas(8) unsigned char scalarBytes[8];
  const void* scalarPtr;
  const char* send;
  char* recv;
  KStamp stamp;
};

struct DirectArgs {
  int32_t nranks;
  int32_t entries;
  int32_t blocksPerRank;
  uint32_t divisor;  // ncclAvg: the result divided by it when > 1
  // Elements of the call's count argument: every rank's input and output (all-reduce,
  // broadcast, reduce), every rank's input (all-gather: outputs hold nranks x count), every
  // rank's output (reduce-scatter: inputs hold nranks x count).
  uint64_t count;
  int32_t root;  // broadcast, reduce; -1 otherwise
  uint8_t kind, type, red;  // red: Sum for the kinds that copy
  DirectEntry entry[kMailboxRanks];
  char* mailbox[kMailboxRanks];  // every rank's mailbox (this process reaches all of them)
  const uint64_t* abortFlag;
  uint64_t timeoutNs;
  uint64_t* report;
  LaunchDone done;
};
static_assert(sizeof(DirectArgs) <= 4096, "direct kernel arguments must fit CUDA's parameter space");

}  // namespace accl::kern
