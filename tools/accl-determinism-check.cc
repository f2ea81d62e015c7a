// accl-determinism-check: how many elements of a float all-reduce differ, bit for bit, from the
// sum in rank order ((x0 + x1) + x2) + ... . One process per rank under accl-run (RANK,
// WORLD_SIZE, NCCL_COMM_ID); rank 0 prints one line per count. The inputs have mixed signs and
// magnitudes from 2^-10 to 2^10, so almost every addition rounds and the order shows.
//
//   build/perf/accl-run -np 4 build/tools/accl-determinism-check 1000 131101 4194304
//   ACCL_DETERMINISTIC=1 NCCL_ALGO=Ring build/perf/accl-run -np 4 build/tools/accl-determinism-check
//
// scripts/determinism-table.sh runs it for default / NCCL_ALGO=Ring / NCCL_ALGO=Tree and prints
// the markdown table of issue 14.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "accl.h"

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank r's element i: +-(1 + fraction) * 2^e with e in [-10, 10].
float input(int rank, size_t i) {
  uint64_t b = mix((static_cast<uint64_t>(rank) << 40) ^ i);
  float mant = 1.0f + static_cast<float>(b & 0xffffff) / 16777216.0f;
  int e = static_cast<int>((b >> 24) % 21) - 10;
  return ((b >> 63) ? -1.0f : 1.0f) * std::ldexp(mant, e);
}

int envInt(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const int rank = envInt("RANK"), nranks = envInt("WORLD_SIZE");
  if (rank < 0 || nranks < 1 || !std::getenv("NCCL_COMM_ID")) {
    std::fprintf(stderr,
                 "usage: accl-run -np N accl-determinism-check [count...]\n"
                 "  (needs RANK, WORLD_SIZE and NCCL_COMM_ID, which accl-run sets)\n");
    return 2;
  }
  std::vector<size_t> counts;
  for (int i = 1; i < argc; i++) counts.push_back(std::strtoull(argv[i], nullptr, 0));
  if (counts.empty()) counts = {1000, 131101, size_t{4} << 20};

  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: communicator init failed: %s\n", rank, ncclGetLastError(nullptr));
    return 3;
  }
  int deterministic = 0;
  ncclCommGetDeterministic(comm, &deterministic);
  for (size_t count : counts) {
    std::vector<float> buf(count);
    for (size_t i = 0; i < count; i++) buf[i] = input(rank, i);
    if (ncclAllReduce(buf.data(), buf.data(), count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) {
      std::fprintf(stderr, "rank %d: ncclAllReduce failed: %s\n", rank, ncclGetLastError(comm));
      return 3;
    }
    if (rank != 0) continue;
    size_t differ = 0;
    for (size_t i = 0; i < count; i++) {
      float want = input(0, i);
      for (int p = 1; p < nranks; p++) want += input(p, i);
      differ += std::memcmp(&want, &buf[i], sizeof want) != 0;
    }
    std::printf("count %zu ranks %d deterministic %d algo %s: %zu differ\n", count, nranks, deterministic,
                std::getenv("NCCL_ALGO") ? std::getenv("NCCL_ALGO") : "default", differ);
    std::fflush(stdout);
  }
  ncclCommDestroy(comm);
  return 0;
}
