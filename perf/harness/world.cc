#include "world.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace accl::perf {
namespace {

const char* firstEnv(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) return v;
  return nullptr;
}

class SingleWorld final : public World {
 public:
  int size() const override { return 1; }
  int rank() const override { return 0; }
  int localRank() const override { return 0; }
  const char* kind() const override { return "single"; }
  std::vector<std::byte> allgather(std::span<const std::byte> mine) override {
    return {mine.begin(), mine.end()};
  }
  [[noreturn]] void abort(int exitCode) override {
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(exitCode);
  }
};

}  // namespace

LaunchEnv readLaunchEnv() {
  LaunchEnv env;
  const char* size = firstEnv({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  const char* rank = firstEnv({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
  const char* local = firstEnv({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
  if (size) {
    env.present = true;
    env.size = std::atoi(size);
    env.rank = rank ? std::atoi(rank) : 0;
  }
  env.localRank = local ? std::atoi(local) : env.rank;
  return env;
}

std::string outOfBandAddress() {
  if (const char* oob = std::getenv("ACCL_PERF_OOB_ADDR"); oob && *oob) return oob;
  const char* commId = std::getenv("NCCL_COMM_ID");
  if (!commId || !*commId) return {};
  std::string_view id(commId);
  const size_t colon = id.rfind(':');
  if (colon == std::string_view::npos) return {};
  const int port = std::atoi(std::string(id.substr(colon + 1)).c_str());
  return std::string(id.substr(0, colon)) + ":" + std::to_string(port + 1);
}

const char* mpiLauncherVariable() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS"}) {
    if (const char* v = std::getenv(name); v && *v) return name;
  }
  return nullptr;
}

std::string mpiLaunchProblem(const char* launcherVariable, bool mpiBuilt, const std::string& outOfBandAddress) {
  if (launcherVariable == nullptr || mpiBuilt || !outOfBandAddress.empty()) return "";
  return std::string("started by an MPI launcher (") + launcherVariable +
         " is set), but this build has no MPI support: CMake did not find MPI when it configured. Install it "
         "(`make deps`, or `apt-get install libopenmpi-dev`), then reconfigure and rebuild (`rm -rf build && make`). "
         "Without MPI, start the ranks with build/perf/accl-run -np N, or set NCCL_COMM_ID=host:port on every rank";
}

std::unique_ptr<World> makeSingleWorld() { return std::make_unique<SingleWorld>(); }

std::unique_ptr<World> makeWorld(int* argc, char*** argv, std::string* error) {
  if (mpiLaunchDetected()) {
    if (auto mpi = makeMpiWorld(argc, argv, error)) return mpi;
    if (!error->empty()) return nullptr;
  }
  *error = mpiLaunchProblem(mpiLauncherVariable(), mpiSupportBuilt(), outOfBandAddress());
  if (!error->empty()) return nullptr;
  const LaunchEnv env = readLaunchEnv();
  if (!env.present || env.size <= 1) return makeSingleWorld();
  if (env.rank < 0 || env.rank >= env.size) {
    *error = "rank " + std::to_string(env.rank) + " is outside the world size " + std::to_string(env.size);
    return nullptr;
  }
  const std::string address = outOfBandAddress();
  if (address.empty()) {
    *error = "a multi-process run needs NCCL_COMM_ID=host:port (or ACCL_PERF_OOB_ADDR) to meet";
    return nullptr;
  }
  return makeTcpWorld(env, address, error);
}

}  // namespace accl::perf
