#include "job.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace accl::perf {
namespace {

std::string shortHostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  std::string host(buf);
  return host.substr(0, host.find('.'));
}

bool envFlag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0";
}

}  // namespace

Job::Job(const Collective& c, const Options& o, World& w)
    : collective(c),
      options(o),
      world(w),
      localRanks(o.nThreads * o.nGpus),
      nranks(w.size() * o.nThreads * o.nGpus),
      printer(w.rank() == 0),
      corruptResults(envFlag("ACCL_PERF_CORRUPT")),
      hostname(shortHostname()),
      comms(static_cast<size_t>(localRanks), nullptr),
      threadBarrier(o.nThreads),
      localSlots_(static_cast<size_t>(localRanks) * kSlotBytes) {
  if (const char* base = std::getenv("NCCL_TESTS_DEVICE"); base && *base) firstDevice = std::atoi(base);
  else firstDevice = w.localRank() * localRanks;
}

Job::~Job() = default;

void Job::makeCurrent(int local) {
  if (!cuda) return;
  const int device = deviceOf(local);
  if (const dev::cuda::CUresult r = cuda->makeCurrent(device); r != dev::cuda::kSuccess)
    failCuda("cuCtxSetCurrent (primary context of device " + std::to_string(device) + "): " + cudaErrorText(*cuda, r),
             __FILE__, __LINE__);
}

void Job::barrier(int thread) {
  const std::vector<char> mine(static_cast<size_t>(options.nGpus), 0);
  gatherAll<char>(thread, mine);
}

void Job::fail(int exitCode, const std::string& what, const char* file, int line) {
  std::fprintf(stderr, "%s: %s\n .. %s pid %d: Test failure %s:%d\n", hostname.c_str(), what.c_str(),
               hostname.c_str(), static_cast<int>(getpid()), file, line);
  world.abort(exitCode);
  std::_Exit(exitCode);  // abort() does not return; this tells the compiler so
}

void Job::failNccl(ncclResult_t result, const char* call, const char* file, int line) {
  const char* last = ncclGetLastError(nullptr);
  std::string what = std::string("Test NCCL failure ") + file + ":" + std::to_string(line) + " '" +
                     ncclGetErrorString(result) + " / " + (last ? last : "") + "' in " + call;
  fail(3, what, file, line);
}

void Job::failCuda(const std::string& what, const char* file, int line) {
  fail(2, "Test CUDA failure " + std::string(file) + ":" + std::to_string(line) + " '" + what + "'", file, line);
}

void initComms(Job& job, int first, int count) {
  const int perThread = job.options.nGpus;
  PERF_NCCL_CHECK(job, ncclGroupStart());
  for (int local = first; local < first + count; ++local) {
    const int rank = job.globalRank(local / perThread, local % perThread);
    job.makeCurrent(local);  // the communicator binds to the current device, as NCCL's does
    PERF_NCCL_CHECK(job, ncclCommInitRank(&job.comms[local], job.nranks, job.uniqueId, rank));
  }
  PERF_NCCL_CHECK(job, ncclGroupEnd());
}

}  // namespace accl::perf
