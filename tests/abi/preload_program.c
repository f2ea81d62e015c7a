/* Linked against NVIDIA's libnccl.so.2 (DT_NEEDED libnccl.so.2, RUNPATH to CUDA's lib dir).
 *   preload_program accl    run with LD_PRELOAD=<ACCL's libnccl.so.2>: ACCL must be the one
 *                           serving the calls (ncclAcclVersionString resolves, NVIDIA's file is
 *                           not mapped) and a host-memory allreduce on 2 thread ranks works.
 *   preload_program nvidia  control without LD_PRELOAD: NVIDIA's library is the one loaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum { kRanks = 2, kCount = 1 << 16 };
static ncclUniqueId gId;

static int mapped(const char* needle) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  while (f && fgets(line, sizeof(line), f))
    if (strstr(line, needle)) found = 1;
  if (f) fclose(f);
  return found;
}

static void* rankMain(void* arg) {
  int rank = (int)(size_t)arg;
  static int buf[kRanks][kCount];
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRank(&comm, kRanks, gId, rank);
  if (r != ncclSuccess) return (void*)"ncclCommInitRank failed";
  for (int i = 0; i < kCount; i++) buf[rank][i] = i + rank;
  r = ncclAllReduce(buf[rank], buf[rank], kCount, ncclInt32, ncclSum, comm, NULL);
  if (r != ncclSuccess) return (void*)"ncclAllReduce failed";
  for (int i = 0; i < kCount; i++)
    if (buf[rank][i] != 2 * i + 1) return (void*)"allreduce result is wrong";
  ncclCommDestroy(comm);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const char* (*accl)(void) = (const char* (*)(void))dlsym(RTLD_DEFAULT, "ncclAcclVersionString");
  const int nvidiaMapped = mapped("/usr/local/cuda");
  if (strcmp(argv[1], "nvidia") == 0) {
    if (accl != NULL || !nvidiaMapped) {
      fprintf(stderr, "control run: expected NVIDIA's libnccl.so.2 (accl symbol %p, nvidia mapped %d)\n",
              (void*)accl, nvidiaMapped);
      return 1;
    }
    printf("control: NVIDIA's libnccl.so.2 is loaded without LD_PRELOAD\n");
    return 0;
  }
  if (accl == NULL) {
    fprintf(stderr, "ncclAcclVersionString does not resolve: ACCL was not preloaded\n");
    return 1;
  }
  if (nvidiaMapped) {
    fprintf(stderr, "NVIDIA's libnccl.so.2 is mapped next to ACCL's: the preload did not replace it\n");
    return 1;
  }
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != 22707) {
    fprintf(stderr, "ncclGetVersion gave %d, not ACCL's 22707\n", version);
    return 1;
  }
  if (ncclGetUniqueId(&gId) != ncclSuccess) return 1;
  pthread_t th[kRanks];
  for (int r = 0; r < kRanks; r++) pthread_create(&th[r], NULL, rankMain, (void*)(size_t)r);
  int failed = 0;
  for (int r = 0; r < kRanks; r++) {
    void* err;
    pthread_join(th[r], &err);
    if (err) {
      fprintf(stderr, "rank %d: %s\n", r, (const char*)err);
      failed = 1;
    }
  }
  if (!failed) printf("preloaded %s: allreduce on %d ranks passed\n", accl(), kRanks);
  return failed;
}
