// collective_matrix.h: the correctness matrix of every collective x datatype x op x
// in-place/out-of-place x count x root, checked against tests/common/reference.h.
//
// What a matrix covers (buildMatrix), per communicator:
//   counts 1 and 7:   every collective x all 12 types x every op (sum, prod, max, min, avg,
//                     PreMulSum with a host-immediate and with a device-resident scalar) x
//                     in-place and out-of-place; count 7 with every root, count 1 a rotating root.
//                     Floats also get non-integer inputs checked with a tolerance (sum, avg, prod,
//                     PreMulSum) at count 7.
//   count 0:          every collective x type, in-place and out-of-place: success, nothing written.
//   prime count:      131101 elements (> the 128 KiB chunk for every type, not a multiple of any
//                     pipeline unit) x every collective x type, in- and out-of-place, with sum and
//                     one more op that rotates through the others (all ops with fullOps).
//   16 MiB (big):     AllReduce float32 and int8 sum, Reduce, ReduceScatter, Broadcast, AllGather,
//                     AlltoAll, Gather, Scatter, Send/Recv ring of 16 MiB buffers.
// Send/Recv are checked as a ring exchange and as all-pairs (self included) in one group.
// Calls alternate between a NULL stream, a host stream (then synchronised), and a one-op group.
// Exactness: integers wrap exactly; float inputs are small integers (or {±1,±2} for prod, any
// finite value for max/min) whose partial results stay representable, so floats are exact too;
// only avg and the non-integer cases use a tolerance (eps(type) x nranks x sum of |terms|).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "common/rank_runner.h"
#include "nccl.h"

namespace accl_test {

enum class Coll {
  AllReduce, Broadcast, Bcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter,
  SendRecvRing, SendRecvAllPairs
};
enum class MatrixOp { None, Sum, Prod, Max, Min, Avg, PreMulHost, PreMulDevice };
enum class Inputs { Exact, Approx, Affine };  // Affine: closed-form sums for the 16 MiB tier

struct MatrixCase {
  Coll coll;
  ncclDataType_t type;
  MatrixOp op;
  bool inPlace;
  size_t count;
  int root;
  Inputs inputs;
  int launch;  // 0: NULL stream, 1: host stream, 2: inside a group
  uint64_t seed;
};

struct MatrixScope {
  bool onlyAllReduceBroadcastReduce = false;  // the forced-algorithm variants
  bool onlyAllGather = false;                 // variants that change only the all-gather
  bool fullOps = false;                       // every op at the prime count, all roots everywhere
  bool big = false;                           // include the 16 MiB tier
  bool fewRoots = false;  // count 7: roots 0, 1, n/2 and n-1 instead of every root (many ranks)
  // One type per element size and kind (int8, int32, bfloat16, float32, float64) instead of all
  // twelve: for runs that repeat a matrix another test runs with every type (the same kernels
  // under one hardware queue) or whose device code only moves bytes (staged kernels). Also set
  // by the environment variable ACCL_TEST_MATRIX_FEW_TYPES=1 (ctest's one-queue reruns).
  bool fewTypes = false;
  // Self-check of the checker: flip a high bit of one output element per case after the call;
  // messages then name the cases whose corruption went unnoticed (expected: none).
  bool corruptOutputs = false;
};

inline constexpr size_t kPrimeCount = 131101;
inline constexpr size_t kBigBytes = size_t{16} << 20;

// Where a matrix keeps its buffers when they are not host memory (tests of a device backend):
// each case's buffers, guard bytes included, are mirrored in device memory, uploaded before the
// call and read back after it, and the checks run on what came back. Calls on the NULL stream
// are followed by synchronize(nullptr), since a device NULL stream does not block the host.
class MatrixDevice {
 public:
  virtual ~MatrixDevice() = default;
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dev, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* dev, size_t bytes) = 0;
  virtual cudaStream_t stream() = 0;  // the stream of launch mode 1
  // The stream of launch modes 0 and 2: the NULL stream, except where ranks are threads of one
  // process on one device, which share the NULL stream (their collectives would wait for each
  // other, as NCCL's kernels would).
  virtual cudaStream_t nullStream() = 0;
  virtual ncclResult_t synchronize(cudaStream_t s) = 0;
};

std::vector<MatrixCase> buildMatrix(int nranks, const MatrixScope& scope);
std::string describeCase(const MatrixCase& c);

// Runs all cases in order on this rank (every rank must run the same list). Returns mismatch
// and error messages, at most a few per case and ~40 in all.
std::vector<std::string> runMatrixCases(ncclComm_t comm, int rank, int nranks, const std::vector<MatrixCase>& cases,
                                        Watchdog* watchdog, bool corruptOutputs = false,
                                        MatrixDevice* device = nullptr);

// Whole matrix on `nranks` threads of this process. Returns all ranks' messages.
std::vector<std::string> runMatrixOnThreads(int nranks, const MatrixScope& scope);
// This process is one rank (child of runChildProcesses).
std::vector<std::string> runMatrixAsRank(const ChildRole& role, const MatrixScope& scope);

// The child side of a matrix test (see runChildProcesses): this process is rank role.rank, or
// runs all role.nranks ranks as threads (role.rank < 0). Every message fails the test.
void expectMatrixPassesInChild(const ChildRole& role, const MatrixScope& scope);

// Messages one a line, for a failure report.
std::string joinedLines(const std::vector<std::string>& messages);

// Scope from the environment: ACCL_TEST_FULL=1 turns on fullOps and big.
bool fullMatrixRequested();

}  // namespace accl_test
