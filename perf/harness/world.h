// The processes of one perf job and the out-of-band channel between them (unique id,
// per-rank results, barriers). Three kinds, picked at start-up:
//  - one process (no launcher variables);
//  - MPI, when built with MPI and started by mpirun (OMPI_COMM_WORLD_SIZE set);
//  - environment: RANK/WORLD_SIZE (or OMPI_*, PMI_*, SLURM_*) and a TCP rendezvous at
//    ACCL_PERF_OOB_ADDR, else at NCCL_COMM_ID's host with port+1 (accl-run sets both).
// Only one thread per process talks to the World.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace accl::perf {

class World {
 public:
  virtual ~World() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  virtual int localRank() const = 0;
  virtual const char* kind() const = 0;
  // Every process passes the same number of bytes; returns them all in process order.
  virtual std::vector<std::byte> allgather(std::span<const std::byte> mine) = 0;
  // Ends the whole job (other processes too, where the kind can).
  [[noreturn]] virtual void abort(int exitCode) = 0;
};

// Returns nullptr and sets `error` when the launch variables are inconsistent.
std::unique_ptr<World> makeWorld(int* argc, char*** argv, std::string* error);

// Launch-variable helpers, shared by the environment world and its tests.
struct LaunchEnv {
  int rank = 0;
  int size = 1;
  int localRank = 0;
  bool present = false;  // some launcher set a world size
};
LaunchEnv readLaunchEnv();
// "host:port" of the out-of-band rendezvous, or empty.
std::string outOfBandAddress();

std::unique_ptr<World> makeSingleWorld();
std::unique_ptr<World> makeTcpWorld(const LaunchEnv& env, const std::string& address, std::string* error);
std::unique_ptr<World> makeMpiWorld(int* argc, char*** argv, std::string* error);  // nullptr without MPI
bool mpiLaunchDetected();
// Whether this build has MPI support compiled in (CMake found MPI when it configured).
bool mpiSupportBuilt();
// The first variable an MPI launcher sets (mpirun/mpiexec of Open MPI, MPICH, PMIx) that is
// present, or nullptr.
const char* mpiLauncherVariable();
// What to tell a user whose binary was started by an MPI launcher (`launcherVariable`) when
// it cannot take part: no MPI support built and no NCCL_COMM_ID to meet by. "" when fine.
std::string mpiLaunchProblem(const char* launcherVariable, bool mpiBuilt, const std::string& outOfBandAddress);

}  // namespace accl::perf
