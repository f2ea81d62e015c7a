#include "api/comm_create.h"
#include <unistd.h>
#include <chrono>
#include <cstdint>
#include <thread>
#include "api/api.h"
#include "base/check.h"
#include "comm/init.h"
#include "base/param.h"
#include "sched/work.h"
#include "sched/group.h"

namespace accl {

namespace {

// Every rank keeps at least an address, a name and peer bookkeeping for each other rank; below
// this a communicator of nranks ranks cannot fit in the host's memory at all.
constexpr int kCommBytesPerRank = 256;

int64_t physicalBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || pageSize <= 0) return INT64_MAX;
  return static_cast<int64_t>(pages) * pageSize;
}

}  // namespace

int64_t mostRanksThisHostHolds() { return physicalBytes() / kCommBytesPerRank; }

ncclResult_t createComm(const char* fn, ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                        const ncclConfig_t* config, const Config* inherit, int cudaDev, bool hostBackend) {
  if (out == nullptr) {
    WARN("%s: comm output pointer is NULL", fn);
    return ncclInvalidArgument;
  }
  if (nranks < 1) {
    WARN("%s: nranks = %d is invalid (must be >= 1)", fn, nranks);
    return ncclInvalidArgument;
  }
  if (rank < 0 || rank >= nranks) {
    WARN("%s: rank = %d is out of range [0, %d)", fn, rank, nranks);
    return ncclInvalidArgument;
  }
  if (int64_t most = mostRanksThisHostHolds(); nranks > most) {
    WARN("%s: nranks = %d is more than this host could hold (at most %lld: %d B of communicator state per rank "
         "in %lld MiB of memory)",
         fn, nranks, static_cast<long long>(most), kCommBytesPerRank, static_cast<long long>(physicalBytes() >> 20));
    return ncclInvalidArgument;
  }
  Config cfg;
  NCCLCHECK(parseConfig(config, inherit, &cfg));
  if (param::hangReportSignal()) installHangReportSignal();

  auto impl = std::make_shared<Comm>();
  impl->config = cfg;
  // On this thread: a CUDA communicator binds to the device current here, as NCCL's does.
  if (hostBackend) {
    impl->backend = dev::hostBackend();
    cudaDev = -1;
  } else {
    NCCLCHECK(dev::backendForNewComm(&impl->backend, &cudaDev));
  }
  impl->cudaDev = cudaDev;
  impl->rank = rank;  // known before a non-blocking init finishes
  impl->nranks = nranks;
  impl->initState.store(ncclInProgress);
  auto handle = std::make_unique<ncclComm>();
  handle->impl = impl;
  ncclComm_t h = handle.release();  // owned by the user from here; freed by destroy/abort
  registerComm(h);
  *out = h;

  auto job = [impl, id, nranks, rank]() {
    ncclResult_t r = initComm(impl.get(), id, nranks, rank);
    if (impl->cudaDev < 0) impl->cudaDev = impl->localIndex;
    if (r != ncclSuccess) {
      int expected = ncclSuccess;
      impl->asyncError.compare_exchange_strong(expected, r);
      impl->closeTransports();
    }
    impl->initState.store(r);
    return r;
  };
  if (!cfg.blocking) {
    std::thread(job).detach();
    return ncclInProgress;
  }
  ncclResult_t r = deferInit(job);
  if (r != ncclSuccess && !inGroup()) {
    unregisterComm(h);
    delete h;
    *out = nullptr;
  }
  return r;
}

void waitIdle(Comm& c) {
  while (c.initState.load() == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  c.backend->drain();  // device streams reach their queued collectives in their own time
  while (c.doneTicket.load(std::memory_order_acquire) != c.issueTicket.load()) {
    Doorbell* bell = c.bell();
    uint32_t seq;
    enterDoorbells(&bell, 1, &seq);
    if (c.doneTicket.load(std::memory_order_acquire) != c.issueTicket.load())
      waitDoorbells(&bell, 1, &seq, 10000);
    leaveDoorbells(&bell, 1);
  }
}

}  // namespace accl
