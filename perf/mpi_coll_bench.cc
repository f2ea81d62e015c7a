// mpi_coll_bench: the same float32 all-reduce (sum) / all-gather that all_reduce_perf and
// all_gather_perf time, through MPI, so perf/compare can put OpenMPI next to ACCL.
//
//   mpirun -np 4 build/perf/mpi_coll_bench all_reduce 8:2000:200 65536:300:30 ...
//
// Each SIZE:ITERS:WARMUP argument is one message size in bytes (all-gather: the total output,
// as nccl-tests counts it), the timed iterations and the warm-up ones. Time per op is each
// rank's mean over the timed loop, averaged over ranks (nccl-tests' default `-a 1`). Rank 0
// prints one JSON object on stdout.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Case {
  size_t bytes = 0;
  long iters = 0;
  long warmup = 0;
};

bool parseCase(const char* text, Case* out) {
  char* end = nullptr;
  out->bytes = std::strtoull(text, &end, 10);
  if (*end != ':') return false;
  out->iters = std::strtol(end + 1, &end, 10);
  if (*end != ':') return false;
  out->warmup = std::strtol(end + 1, &end, 10);
  return *end == '\0' && out->bytes > 0 && out->iters > 0 && out->warmup >= 0;
}

int usage() {
  std::fprintf(stderr, "usage: mpi_coll_bench all_reduce|all_gather SIZE:ITERS:WARMUP...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 3) {
    if (rank == 0) usage();
    MPI_Finalize();
    return 2;
  }
  const std::string coll = argv[1];
  const bool allReduce = coll == "all_reduce";
  if (!allReduce && coll != "all_gather") {
    if (rank == 0) usage();
    MPI_Finalize();
    return 2;
  }
  std::vector<Case> cases;
  for (int i = 2; i < argc; i++) {
    Case c;
    if (!parseCase(argv[i], &c)) {
      if (rank == 0) std::fprintf(stderr, "mpi_coll_bench: bad case \"%s\"\n", argv[i]);
      MPI_Finalize();
      return 2;
    }
    cases.push_back(c);
  }

  if (rank == 0) std::printf("{\"backend\":\"mpi\",\"collective\":\"%s\",\"np\":%d,\"results\":[", coll.c_str(), n);
  for (size_t ci = 0; ci < cases.size(); ci++) {
    const Case& c = cases[ci];
    // Counts in floats; all-gather's per-rank share, at least one element.
    const size_t count = allReduce ? std::max<size_t>(1, c.bytes / 4) : std::max<size_t>(1, c.bytes / 4 / n);
    const size_t outCount = allReduce ? count : count * n;
    std::vector<float> in(count, 1.0f + rank), out(outCount, 0.0f);  // touched before timing
    auto op = [&] {
      if (allReduce)
        MPI_Allreduce(in.data(), out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else
        MPI_Allgather(in.data(), static_cast<int>(count), MPI_FLOAT, out.data(), static_cast<int>(count), MPI_FLOAT,
                      MPI_COMM_WORLD);
    };
    for (long i = 0; i < c.warmup; i++) op();
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (long i = 0; i < c.iters; i++) op();
    const double mine = (MPI_Wtime() - t0) / static_cast<double>(c.iters) * 1e6;
    double sum = 0;
    MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    // A wrong answer would make the comparison meaningless: check one element.
    const float want = allReduce ? static_cast<float>(n) * (n + 1) / 2 : static_cast<float>(n);
    const float got = allReduce ? out[0] : out[(n - 1) * count];
    if (got != want) std::fprintf(stderr, "mpi_coll_bench: rank %d got %g, want %g\n", rank, got, want);
    if (rank == 0)
      std::printf("%s{\"bytes\":%zu,\"time_us\":%.4f,\"iters\":%ld}", ci ? "," : "", c.bytes, sum / n, c.iters);
  }
  if (rank == 0) std::printf("]}\n");
  MPI_Finalize();
  return 0;
}
