/* A C11 program (not C++) compiled against ACCL's include/nccl.h: proves the header is valid C
 * and that the library works for C callers. Phase 1: four pthread ranks, one communicator each
 * (ncclCommInitRank with a shared unique id), running allreduce, broadcast and allgather.
 * Phase 2: ncclCommInitAll from one thread and a group of allreduces over all four comms.
 * Exit status 0 = every result matched. */
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kRanks = 4, kCount = 1000 };

static ncclUniqueId gId;

#define CHECK(call)                                                                             \
  do {                                                                                          \
    ncclResult_t r_ = (call);                                                                   \
    if (r_ != ncclSuccess) {                                                                    \
      fprintf(stderr, "%s:%d: %s returned %d (%s): %s\n", __FILE__, __LINE__, #call, (int)r_, \
              ncclGetErrorString(r_), ncclGetLastError(NULL));                                  \
      return 1;                                                                                 \
    }                                                                                           \
  } while (0)

#define EXPECT(cond, ...)                   \
  do {                                      \
    if (!(cond)) {                          \
      fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);         \
      fputc('\n', stderr);                  \
      return 1;                             \
    }                                       \
  } while (0)

static int runRank(int rank) {
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, kRanks, gId, rank));
  int n = 0, me = -1;
  CHECK(ncclCommCount(comm, &n));
  CHECK(ncclCommUserRank(comm, &me));
  EXPECT(n == kRanks && me == rank, "count %d rank %d, want %d %d", n, me, kRanks, rank);

  float* in = malloc(sizeof(float) * kCount);
  float* out = malloc(sizeof(float) * kCount);
  for (int i = 0; i < kCount; i++) in[i] = (float)(rank + 1) * (float)(i % 7);
  CHECK(ncclAllReduce(in, out, kCount, ncclFloat, ncclSum, comm, NULL));
  for (int i = 0; i < kCount; i++) /* sum over ranks of (r+1) = 10 */
    EXPECT(out[i] == 10.0f * (float)(i % 7), "allreduce out[%d] = %g", i, (double)out[i]);

  int* b = malloc(sizeof(int) * kCount);
  for (int i = 0; i < kCount; i++) b[i] = rank == 2 ? i * 3 + 1 : -1;
  CHECK(ncclBroadcast(b, b, kCount, ncclInt32, 2, comm, NULL));
  for (int i = 0; i < kCount; i++) EXPECT(b[i] == i * 3 + 1, "broadcast b[%d] = %d", i, b[i]);

  int* g = malloc(sizeof(int) * kCount * kRanks);
  int mine[kCount];
  for (int i = 0; i < kCount; i++) mine[i] = rank * 100000 + i;
  CHECK(ncclAllGather(mine, g, kCount, ncclInt32, comm, NULL));
  for (int r = 0; r < kRanks; r++)
    for (int i = 0; i < kCount; i++)
      EXPECT(g[r * kCount + i] == r * 100000 + i, "allgather block %d [%d] = %d", r, i, g[r * kCount + i]);

  free(in);
  free(out);
  free(b);
  free(g);
  CHECK(ncclCommFinalize(comm));
  CHECK(ncclCommDestroy(comm));
  return 0;
}

static void* rankThread(void* arg) {
  int rank = (int)(size_t)arg;
  return (void*)(size_t)runRank(rank);
}

static int runInitAllGroup(void) {
  ncclComm_t comms[kRanks];
  int devs[kRanks] = {0, 0, 0, 0};
  CHECK(ncclCommInitAll(comms, kRanks, devs));
  double buf[kRanks][64];
  for (int r = 0; r < kRanks; r++)
    for (int i = 0; i < 64; i++) buf[r][i] = r + i;
  CHECK(ncclGroupStart());
  for (int r = 0; r < kRanks; r++) CHECK(ncclAllReduce(buf[r], buf[r], 64, ncclDouble, ncclMax, comms[r], NULL));
  CHECK(ncclGroupEnd());
  for (int r = 0; r < kRanks; r++)
    for (int i = 0; i < 64; i++) EXPECT(buf[r][i] == kRanks - 1 + i, "initall max buf[%d][%d] = %g", r, i, buf[r][i]);
  for (int r = 0; r < kRanks; r++) CHECK(ncclCommDestroy(comms[r]));
  return 0;
}

int main(void) {
  int version = 0;
  CHECK(ncclGetVersion(&version));
  EXPECT(version == NCCL_VERSION_CODE, "ncclGetVersion = %d, header says %d", version, NCCL_VERSION_CODE);
  CHECK(ncclGetUniqueId(&gId));
  pthread_t th[kRanks];
  for (int r = 0; r < kRanks; r++) pthread_create(&th[r], NULL, rankThread, (void*)(size_t)r);
  int failed = 0;
  for (int r = 0; r < kRanks; r++) {
    void* rc;
    pthread_join(th[r], &rc);
    if (rc != NULL) {
      fprintf(stderr, "rank %d failed\n", r);
      failed = 1;
    }
  }
  if (failed) return 1;
  if (runInitAllGroup() != 0) return 1;
  printf("C program: 4 thread ranks and an InitAll group passed\n");
  return 0;
}
