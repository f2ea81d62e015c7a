// Compiled against NVIDIA's nccl.h (2.28 header, -I/usr/local/cuda/include) and linked to
// ACCL's libnccl.so.2: configs built by NVIDIA's NCCL_CONFIG_INITIALIZER (size 80, version
// 22809, newer than ours) are accepted, and collectives declared by NVIDIA's prototypes work.
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 3;
constexpr size_t kCount = 4096;
ncclUniqueId gId, gId2;

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    if (r_ != ncclSuccess) {                                                                            \
      std::fprintf(stderr, "rank %d: %s returned %d: %s\n", rank, #call, (int)r_, ncclGetLastError(nullptr)); \
      return 1;                                                                                         \
    }                                                                                                   \
  } while (0)
#define EXPECT(cond, ...)                                        \
  do {                                                           \
    if (!(cond)) {                                               \
      std::fprintf(stderr, "rank %d: %s: ", rank, #cond);        \
      std::fprintf(stderr, __VA_ARGS__);                         \
      std::fputc('\n', stderr);                                  \
      return 1;                                                  \
    }                                                            \
  } while (0)

int runRank(int rank) {
  // Blocking comm, configured like nccl-tests does with a 2.28 header.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.nvlinkCentricSched = 1;
  config.commName = "nvidia-header-blocking";
  ncclComm_t comm = nullptr;
  CHECK(ncclCommInitRankConfig(&comm, kRanks, gId, rank, &config));

  std::vector<float> send(kCount * kRanks), recv(kCount * kRanks);
  for (size_t i = 0; i < send.size(); i++) send[i] = float(rank + 1) + float(i % 5);
  CHECK(ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm, nullptr));
  for (size_t i = 0; i < kCount; i++) EXPECT(recv[i] == 6.0f + 3.0f * float(i % 5), "allreduce [%zu] = %g", i, recv[i]);

  CHECK(ncclReduceScatter(send.data(), recv.data(), kCount, ncclFloat32, ncclMax, comm, nullptr));
  for (size_t i = 0; i < kCount; i++)
    EXPECT(recv[i] == 3.0f + float((rank * kCount + i) % 5), "reducescatter [%zu] = %g", i, recv[i]);

  CHECK(ncclAlltoAll(send.data(), recv.data(), kCount, ncclFloat32, comm, nullptr));
  for (int src = 0; src < kRanks; src++)
    for (size_t i = 0; i < kCount; i++)
      EXPECT(recv[src * kCount + i] == float(src + 1) + float((rank * kCount + i) % 5), "alltoall from %d [%zu]", src, i);

  // PreMulSum with a host scalar, as nccl-tests' "mulsum".
  float scalar = rank % 2 ? 2.0f : 1.0f;
  ncclRedOp_t mulsum;
  CHECK(ncclRedOpCreatePreMulSum(&mulsum, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  CHECK(ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, mulsum, comm, nullptr));
  CHECK(ncclRedOpDestroy(mulsum, comm));
  for (size_t i = 0; i < kCount; i++) {
    float want = 0;
    for (int r = 0; r < kRanks; r++) want += (r % 2 ? 2.0f : 1.0f) * (float(r + 1) + float(i % 5));
    EXPECT(recv[i] == want, "mulsum [%zu] = %g, want %g", i, recv[i], want);
  }
  CHECK(ncclCommFinalize(comm));
  CHECK(ncclCommDestroy(comm));

  // Non-blocking comm from the same initializer: InProgress or Success, then poll.
  ncclConfig_t nb = NCCL_CONFIG_INITIALIZER;
  nb.blocking = 0;
  ncclComm_t comm2 = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm2, kRanks, gId2, rank, &nb);
  EXPECT(r == ncclSuccess || r == ncclInProgress, "non-blocking init returned %d", (int)r);
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) CHECK(ncclCommGetAsyncError(comm2, &state));
  EXPECT(state == ncclSuccess, "non-blocking init ended with %d", (int)state);
  int v = rank;
  CHECK(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm2, nullptr));
  do CHECK(ncclCommGetAsyncError(comm2, &state)); while (state == ncclInProgress);
  EXPECT(v == 0 + 1 + 2, "non-blocking allreduce = %d", v);
  CHECK(ncclCommDestroy(comm2));
  return 0;
}

}  // namespace

int main() {
  int rank = -1;
  int version = 0;
  CHECK(ncclGetVersion(&version));
  std::printf("NVIDIA header %d, library reports %d\n", NCCL_VERSION_CODE, version);
  CHECK(ncclGetUniqueId(&gId));
  CHECK(ncclGetUniqueId(&gId2));
  std::vector<std::thread> threads;
  std::vector<int> rc(kRanks, -1);
  for (int r = 0; r < kRanks; r++) threads.emplace_back([&rc, r] { rc[r] = runRank(r); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; r++)
    if (rc[r] != 0) return 1;
  std::printf("OK: %d ranks ran collectives with NVIDIA-header configs\n", kRanks);
  return 0;
}
