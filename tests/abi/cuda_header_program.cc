// Compiled against OUR nccl.h with the CUDA headers on the include path (no nvcc, no GPU):
// programs written for NCCL use half, __nv_bfloat16 and the fp8 types after including nccl.h
// alone, as NVIDIA's header allows. Runs a two-rank float16 all-reduce on host memory.
#include <nccl.h>

#include <cstdio>
#include <vector>

#ifndef ACCL_NCCL_H_WITH_CUDA
#error "nccl.h did not bring in the CUDA headers although they are on the include path"
#endif

static_assert(sizeof(half) == 2 && sizeof(__nv_bfloat16) == 2 && sizeof(__nv_fp8_e4m3) == 1,
              "CUDA's 16- and 8-bit float types come with nccl.h");

int main() {
  constexpr int kRanks = 2;
  constexpr int kCount = 1000;
  ncclComm_t comms[kRanks];
  ncclResult_t r = ncclCommInitAll(comms, kRanks, nullptr);
  if (r != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitAll: %s\n", ncclGetErrorString(r));
    return 1;
  }
  std::vector<half> in[kRanks], out[kRanks];
  for (int rank = 0; rank < kRanks; rank++) {
    in[rank].assign(kCount, __float2half(rank == 0 ? 1.5f : 2.25f));
    out[rank].assign(kCount, __float2half(0.0f));
  }
  ncclGroupStart();
  for (int rank = 0; rank < kRanks; rank++)
    ncclAllReduce(in[rank].data(), out[rank].data(), kCount, ncclFloat16, ncclSum, comms[rank], nullptr);
  r = ncclGroupEnd();
  if (r != ncclSuccess) {
    std::fprintf(stderr, "ncclAllReduce: %s\n", ncclGetErrorString(r));
    return 1;
  }
  int bad = 0;
  for (int rank = 0; rank < kRanks; rank++)
    for (int i = 0; i < kCount; i++) bad += __half2float(out[rank][i]) != 3.75f;
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  int version = 0;
  ncclGetVersion(&version);
  std::printf("%s: half all-reduce over %d ranks, version %d\n", bad ? "FAIL" : "OK", kRanks, version);
  return bad ? 1 : 0;
}
