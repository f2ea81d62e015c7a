// The MPI world: compiled with MPI only when CMake found it (ACCL_PERF_HAVE_MPI), used only
// when mpirun started us, so the same binaries run without MPI.
#include <cstdlib>

#include "world.h"

#ifdef ACCL_PERF_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: no C++ bindings library to link
#define MPICH_SKIP_MPICXX 1
#include <cstdio>
#include <mpi.h>
#endif

namespace accl::perf {

#ifdef ACCL_PERF_HAVE_MPI
namespace {

class MpiWorld final : public World {
 public:
  MpiWorld(int rank, int size, int localRank) : rank_(rank), size_(size), localRank_(localRank) {}
  ~MpiWorld() override { MPI_Finalize(); }
  int size() const override { return size_; }
  int rank() const override { return rank_; }
  int localRank() const override { return localRank_; }
  const char* kind() const override { return "mpi"; }
  std::vector<std::byte> allgather(std::span<const std::byte> mine) override {
    std::vector<std::byte> all(mine.size() * static_cast<size_t>(size_));
    MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(), static_cast<int>(mine.size()),
                  MPI_BYTE, MPI_COMM_WORLD);
    return all;
  }
  [[noreturn]] void abort(int exitCode) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exitCode);
    std::_Exit(exitCode);
  }

 private:
  int rank_, size_, localRank_;
};

}  // namespace

bool mpiSupportBuilt() { return true; }

bool mpiLaunchDetected() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size && *size;
}

std::unique_ptr<World> makeMpiWorld(int* argc, char*** argv, std::string* error) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    *error = "MPI_Init_thread failed";
    return nullptr;
  }
  int rank = 0, size = 1, localRank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &localRank);
  MPI_Comm_free(&local);
  return std::make_unique<MpiWorld>(rank, size, localRank);
}

#else

bool mpiSupportBuilt() { return false; }
bool mpiLaunchDetected() { return false; }
std::unique_ptr<World> makeMpiWorld(int*, char***, std::string*) { return nullptr; }

#endif

}  // namespace accl::perf
