// float_calls.h: float32 collectives with known answers, for the path tests (direct_kinds_test,
// ll_path_test): each rank's input, what each rank's output must hold afterwards (reductions
// folded in rank order, float after every step: the bits of the mailbox kernel and the host
// backend; the sentinel where a call writes nothing), and the call itself.
#pragma once
#include <cstddef>
#include "nccl.h"

namespace accl_cuda_test {

constexpr float kSentinel = -12345.5f;

inline float input(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 2654435761u + rank * 97) % 2001) - 1000) * 0.3751f;
}

// Element i of every rank's input folded in rank order.
inline float folded(int n, size_t i) {
  float acc = input(0, i);
  for (int r = 1; r < n; r++) acc = acc + input(r, i);
  return acc;
}

enum class Kind { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce };

inline const char* kindName(Kind k) {
  switch (k) {
    case Kind::AllReduce: return "AllReduce";
    case Kind::AllGather: return "AllGather";
    case Kind::ReduceScatter: return "ReduceScatter";
    case Kind::Broadcast: return "Broadcast";
    case Kind::Reduce: return "Reduce";
  }
  return "?";
}

struct Call {
  Kind kind;
  int n;
  size_t count;  // the call's count argument
  int root = -1;
  bool inPlace = false;
};

inline size_t inElems(const Call& c) { return c.kind == Kind::ReduceScatter ? c.count * c.n : c.count; }
inline size_t outElems(const Call& c) { return c.kind == Kind::AllGather ? c.count * c.n : c.count; }

inline float expected(const Call& c, int rank, size_t i) {
  switch (c.kind) {
    case Kind::AllReduce: return folded(c.n, i);
    case Kind::AllGather: return input(static_cast<int>(i / c.count), i % c.count);
    case Kind::ReduceScatter: return folded(c.n, rank * c.count + i);
    case Kind::Broadcast: return input(c.root, i);
    case Kind::Reduce: return rank == c.root ? folded(c.n, i) : (c.inPlace ? input(rank, i) : kSentinel);
  }
  return 0;
}

inline ncclResult_t issue(const Call& c, const void* in, void* out, ncclComm_t comm, cudaStream_t st) {
  switch (c.kind) {
    case Kind::AllReduce: return ncclAllReduce(in, out, c.count, ncclFloat32, ncclSum, comm, st);
    case Kind::AllGather: return ncclAllGather(in, out, c.count, ncclFloat32, comm, st);
    case Kind::ReduceScatter: return ncclReduceScatter(in, out, c.count, ncclFloat32, ncclSum, comm, st);
    case Kind::Broadcast: return ncclBroadcast(in, out, c.count, ncclFloat32, c.root, comm, st);
    case Kind::Reduce: return ncclReduce(in, out, c.count, ncclFloat32, ncclSum, c.root, comm, st);
  }
  return ncclInternalError;
}

}  // namespace accl_cuda_test
