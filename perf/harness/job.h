// State shared by the threads of one perf process: options, world, communicators, the
// in-process half of result exchange, and the printer's running totals.
#pragma once

#include <barrier>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "collective.h"
#include "cuda_session.h"
#include "json_report.h"
#include "options.h"
#include "world.h"

namespace accl::perf {

struct Job {
  Job(const Collective& c, const Options& o, World& w);
  ~Job();

  const Collective& collective;
  Options options;
  World& world;
  int localRanks;  // ranks in this process (t * g)
  int nranks;      // ranks in the job
  bool printer;    // process 0 prints and writes JSON
  bool corruptResults;  // ACCL_PERF_CORRUPT: test-only, proves that checking catches errors
  std::string hostname;
  ncclUniqueId uniqueId{};
  std::vector<ncclComm_t> comms;  // one per local rank
  std::barrier<> threadBarrier;
  std::unique_ptr<JsonReport> json;
  // Where buffers live (decided by chooseBufferMode before the communicators are created);
  // `cuda` is set in device mode only.
  BufferMode bufferMode;
  std::unique_ptr<CudaSession> cuda;
  // The device of this process's first rank: NCCL_TESTS_DEVICE, else localRank * t * g (nccl-tests).
  int firstDevice = 0;

  // Printer totals (thread 0 of process 0 only).
  int outOfBounds = 0;
  double busBwSum = 0;
  int busBwCount = 0;
  bool anyWrong = false;  // every process tracks it, for the exit code

  int globalRank(int thread, int gpu) const {
    return world.rank() * localRanks + thread * options.nGpus + gpu;
  }

  // Every thread passes its ranks' records (nGpus of them); all get every rank's, in rank order.
  template <class T>
  std::vector<T> gatherAll(int thread, std::span<const T> mine) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kSlotBytes);
    for (size_t i = 0; i < mine.size(); ++i)
      std::memcpy(&localSlots_[(thread * options.nGpus + i) * kSlotBytes], &mine[i], sizeof(T));
    threadBarrier.arrive_and_wait();
    if (thread == 0) globalSlots_ = world.allgather(localSlots_);
    threadBarrier.arrive_and_wait();
    std::vector<T> all(static_cast<size_t>(nranks));
    for (size_t r = 0; r < all.size(); ++r) std::memcpy(&all[r], &globalSlots_[r * kSlotBytes], sizeof(T));
    return all;
  }
  // Local rank i (thread * g + gpu) uses device (firstDevice + i) % devices: several ranks
  // share a device when there are fewer devices than ranks (NCCL refuses that; ACCL does not).
  int deviceOf(int local) const { return cuda ? (firstDevice + local) % cuda->deviceCount() : firstDevice + local; }
  // Device mode: makes local rank `local`'s device current on the calling thread (ends the
  // job on failure). Host mode: nothing.
  void makeCurrent(int local);

  // All ranks of all processes meet.
  void barrier(int thread);

  // Prints nccl-tests' failure lines and ends the job with `exitCode`.
  [[noreturn]] void fail(int exitCode, const std::string& what, const char* file, int line);
  [[noreturn]] void failNccl(ncclResult_t result, const char* call, const char* file, int line);
  // A CUDA or host-stream call that failed (`what` names it), nccl-tests' "Cuda failure" (exit 2).
  [[noreturn]] void failCuda(const std::string& what, const char* file, int line);

 private:
  static constexpr size_t kSlotBytes = 64;
  std::vector<std::byte> localSlots_;
  std::vector<std::byte> globalSlots_;
};

#define PERF_NCCL_CHECK(job, call)                                                 \
  do {                                                                             \
    const ncclResult_t perfResult_ = (call);                                       \
    if (perfResult_ != ncclSuccess && perfResult_ != ncclInProgress)               \
      (job).failNccl(perfResult_, #call, __FILE__, __LINE__);                      \
  } while (0)

// Creates comms[first .. first+count) in one group (the caller's thread).
void initComms(Job& job, int first, int count);

// The per-thread part of a run: buffers, streams, the sweep (measure.cc).
void runThread(Job& job, int thread);

}  // namespace accl::perf
