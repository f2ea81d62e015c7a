// What one perf binary measures. Each collectives/<name>.cc defines one Collective (sizes,
// bandwidth factor, in-place layout, expected result, the NCCL call) and a main() that hands
// it to the shared harness (runPerfTest in runner.h).
#pragma once

#include <cstddef>
#include <string>

#include "data_pattern.h"
#include "nccl.h"

namespace accl::perf {

// Element counts and byte figures of one row, for one rank.
struct Layout {
  size_t count = 0;          // the count argument (and the table's count column)
  size_t sendElems = 0;      // elements read from the send buffer
  size_t recvElems = 0;      // elements of the result region
  size_t sizeBytes = 0;      // the table's size column
  size_t algBytes = 0;       // bytes that algbw divides by time
  size_t inPlaceSendOffset = 0;  // in place: send = recv buffer + this many elements
  size_t inPlaceRecvOffset = 0;  // in place: result region = recv buffer + this many elements
};

struct CallArgs {
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  int rank;
  int nranks;
  ncclComm_t comm;
  cudaStream_t stream;
};

enum class RedopColumn { kOpName, kNone, kEmpty };

class Collective {
 public:
  virtual ~Collective() = default;
  virtual const char* name() const = 0;  // e.g. "all_reduce_perf"
  virtual Layout layout(size_t bytes, size_t elemSize, int nranks, int rank) const = 0;
  virtual double busBwFactor(int nranks) const = 0;
  virtual ncclResult_t call(const CallArgs& a, int phase) const = 0;
  // Expected value of result element `index` on `rank`.
  virtual double expected(const DataPattern& p, const Layout& l, int rank, int nranks, int root,
                          size_t index) const = 0;

  virtual bool loopsOverOps() const { return false; }  // -o all applies
  virtual bool reduces() const { return false; }       // inputs are combined (data pattern)
  virtual bool hasRoot() const { return false; }       // -r -1 loops over roots
  virtual RedopColumn redopColumn() const { return RedopColumn::kNone; }
  virtual bool checksRank(int /*rank*/, int /*root*/) const { return true; }
  // Ops that must complete in order (hypercube rounds) are issued one phase per group.
  virtual int phases(int /*nranks*/) const { return 1; }
  // Empty when this rank count can run; else why it cannot.
  virtual std::string unsupportedReason(int /*nranks*/) const { return {}; }
};

// (B/E)/n rounded down to a multiple of 16/E elements, so each rank's block is 16-byte sized.
inline size_t roundedPerRankCount(size_t bytes, size_t elemSize, int nranks) {
  const size_t perRank = bytes / elemSize / static_cast<size_t>(nranks);
  const size_t align = elemSize >= 16 ? 1 : 16 / elemSize;
  return perRank / align * align;
}

// The three buffer shapes of nccl-tests: one buffer of B/E elements on every rank
// (all-reduce, broadcast, reduce, sendrecv); n rounded blocks gathered into the receive
// buffer (all-gather, gather; in place: send = recv + rank's block); n rounded blocks
// scattered out of the send buffer (reduce-scatter, scatter; in place: result = send +
// rank's block). sizeBytes = algBytes = the larger side.
inline Layout wholeBufferLayout(size_t bytes, size_t elemSize) {
  Layout l;
  l.count = bytes / elemSize;
  l.sendElems = l.recvElems = l.count;
  l.sizeBytes = l.algBytes = l.count * elemSize;
  return l;
}
inline Layout gatheredLayout(size_t bytes, size_t elemSize, int n, int rank) {
  Layout l;
  l.count = roundedPerRankCount(bytes, elemSize, n);
  l.sendElems = l.count;
  l.recvElems = l.count * n;
  l.sizeBytes = l.algBytes = l.recvElems * elemSize;
  l.inPlaceSendOffset = l.count * rank;
  return l;
}
inline Layout scatteredLayout(size_t bytes, size_t elemSize, int n, int rank) {
  Layout l;
  l.count = roundedPerRankCount(bytes, elemSize, n);
  l.sendElems = l.count * n;
  l.recvElems = l.count;
  l.sizeBytes = l.algBytes = l.sendElems * elemSize;
  l.inPlaceRecvOffset = l.count * rank;
  return l;
}

}  // namespace accl::perf
