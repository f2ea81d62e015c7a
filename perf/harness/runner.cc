// Start-up and shut-down of a perf run: options, world, unique id, communicators, threads,
// preamble and footer. The measuring itself is in measure.cc.
#include "runner.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "accl.h"
#include "cuda_graph.h"
#include "job.h"
#include "table_format.h"

namespace accl::perf {
namespace {

// What each process tells process 0 about its ranks, for the "Using devices" lines.
struct RankDescription {
  int rank;
  int pid;
  int device;
  unsigned pci[3];  // domain, bus, device
  char deviceMemory;  // this process runs in device mode
  char host[48];
  char deviceName[64];
};

void describeDevices(Job& job) {
  std::vector<RankDescription> mine(static_cast<size_t>(job.localRanks));
  for (int i = 0; i < job.localRanks; ++i) {
    RankDescription& d = mine[i];
    d = {};
    d.rank = job.world.rank() * job.localRanks + i;
    d.pid = static_cast<int>(getpid());
    d.device = job.deviceOf(i);
    d.deviceMemory = job.cuda ? 1 : 0;
    std::snprintf(d.host, sizeof d.host, "%s", job.hostname.c_str());
    std::string name = "ACCL host device";
    if (job.cuda) {
      name = job.cuda->deviceName(d.device);
      job.cuda->pciId(d.device, &d.pci[0], &d.pci[1], &d.pci[2]);
    }
    std::snprintf(d.deviceName, sizeof d.deviceName, "%s", name.c_str());
  }
  const auto bytes = std::as_bytes(std::span<const RankDescription>(mine));
  const std::vector<std::byte> all = job.world.allgather(bytes);
  bool mixed = false;
  for (size_t off = 0; off + sizeof(RankDescription) <= all.size(); off += sizeof(RankDescription)) {
    RankDescription d;
    std::memcpy(&d, all.data() + off, sizeof d);
    mixed |= (d.deviceMemory != 0) != (job.cuda != nullptr);
    if (!job.printer) continue;
    std::fputs(deviceLine(d.rank, 0, d.pid, d.host, d.device, d.deviceName, d.pci).c_str(), stdout);
    if (job.json) job.json->addDevice({d.rank, 0, d.pid, d.host, d.device, d.deviceName, pciHex(d.pci)});
  }
  // Every process sees the same list, so all of them stop here together.
  if (mixed)
    job.fail(2, "processes disagree on the buffer mode (some have device memory, some host memory); "
                "use --host or --device on all of them", __FILE__, __LINE__);
}

// -y 1 under CUDA: every rank of a process on one device shares that device's default stream,
// an in-order queue. Ranks of one thread are issued in one group, which the library runs
// together; ranks of two threads are issued separately, so the one queued first would wait
// forever for its peer queued behind it.
std::string sharedNullStreamProblem(const Job& job) {
  if (!job.cuda || !job.options.streamNull) return {};
  const int g = job.options.nGpus;
  for (int a = 0; a < job.localRanks; ++a)
    for (int b = a + 1; b < job.localRanks; ++b)
      if (a / g != b / g && job.deviceOf(a) == job.deviceOf(b))
        return "-y 1 (NULL stream) with local ranks " + std::to_string(a) + " and " + std::to_string(b) +
               " of different threads on device " + std::to_string(job.deviceOf(a)) +
               ": they would share its default stream, where the one issued first waits behind the other; "
               "drop -y 1, use -t 1 -g N, or one process per rank (accl-run -np N ... -g 1)";
  return {};
}

// -G captures the ranks' CUDA streams: it needs device mode and created streams. On host
// buffers it is reported and turned off (a host stream cannot be captured); the NULL stream
// (-y 1) cannot be captured either, which nccl-tests would find out at cudaStreamBeginCapture.
std::string graphProblem(Job& job, std::vector<std::string>* notes) {
  if (!job.options.cudaGraph) return {};
  if (!job.cuda) {
    notes->push_back("# CUDA graphs (-G) need device buffers and CUDA streams; -G ignored on host buffers");
    job.options.cudaGraph = 0;
    return {};
  }
  if (job.options.streamNull) return "-G with -y 1: the NULL stream cannot be captured in a CUDA graph; drop -y 1";
  std::string why;
  if (!StreamGraphs::available(&why)) return "-G: " + why;
  return {};
}

void shareUniqueId(Job& job) {
  ncclUniqueId id{};
  if (job.world.rank() == 0) PERF_NCCL_CHECK(job, ncclGetUniqueId(&id));
  const auto bytes = std::as_bytes(std::span<const ncclUniqueId>(&id, 1));
  const std::vector<std::byte> all = job.world.allgather(bytes);
  std::memcpy(&job.uniqueId, all.data(), sizeof id);  // process 0's
}

double minBandwidthCheck() {
  const char* v = std::getenv("NCCL_TESTS_MIN_BW");
  return v && *v ? std::atof(v) : -1.0;
}

}  // namespace

int runPerfTest(int argc, char** argv, const Collective& collective) {
  ParseResult parsed = parseOptions(argc, argv);
  if (parsed.helpRequested) {
    std::fputs(usageText(argv[0]).c_str(), stdout);
    return 0;
  }
  if (!parsed.error.empty()) {
    std::fprintf(stderr, "%s: %s\n%s", argv[0], parsed.error.c_str(), usageText(argv[0]).c_str());
    return 6;
  }
  std::string worldError;
  std::unique_ptr<World> world = makeWorld(&argc, &argv, &worldError);
  if (!world) {
    std::fprintf(stderr, "%s: %s\n", argv[0], worldError.c_str());
    return 6;
  }
  Job job(collective, parsed.options, *world);
  const Options& o = job.options;
  const char* program = collective.name();
  const BufferRequest request =
      bufferRequest(o.buffers, std::getenv("ACCL_PERF_HOST"), std::getenv("ACCL_PERF_DEVICE"));
  job.bufferMode = chooseBufferMode(request, job.firstDevice, &job.cuda);
  if (!job.bufferMode.error.empty()) job.fail(2, job.bufferMode.error, __FILE__, __LINE__);
  if (const std::string why = sharedNullStreamProblem(job); !why.empty()) job.fail(6, why, __FILE__, __LINE__);
  if (const std::string why = graphProblem(job, &parsed.notes); !why.empty()) job.fail(6, why, __FILE__, __LINE__);

  if (job.printer) {
    if (!o.jsonPath.empty()) {
      std::string note;
      job.json = std::make_unique<JsonReport>(o.jsonPath, &note);
      std::puts(note.c_str());
      if (!job.json->active()) job.json.reset();
    }
    for (const std::string& line : parsed.notes) std::puts(line.c_str());
    int libraryVersion = 0;
    ncclGetVersion(&libraryVersion);
    std::fputs(preambleText(program, o, NCCL_VERSION_CODE, libraryVersion).c_str(), stdout);
    if (job.json) job.json->setRun(argc, argv, o, libraryVersion, program, job.nranks, job.cuda != nullptr);
  }
  describeDevices(job);
  std::fflush(stdout);

  if (const std::string why = collective.unsupportedReason(job.nranks); !why.empty()) {
    if (job.printer) std::printf("# %s (%d ranks); skipping\n", why.c_str(), job.nranks);
    return 0;
  }

  shareUniqueId(job);
  if (!o.parallelInit) initComms(job, 0, job.localRanks);
  if (job.printer) {
    std::printf("# Buffers: %s\n", job.bufferMode.why.c_str());
    std::fputs(tableHeader(o.reportCpuTime != 0, o.reportTimestamps != 0).c_str(), stdout);
    std::fflush(stdout);
  }

  {
    std::vector<std::jthread> helpers;
    for (int t = 1; t < o.nThreads; ++t) helpers.emplace_back([&job, t] { runThread(job, t); });
    runThread(job, 0);  // thread 0 stays the main thread: MPI calls come from it
  }
  for (ncclComm_t comm : job.comms)
    if (comm) PERF_NCCL_CHECK(job, ncclCommDestroy(comm));

  const double avgBusBw = job.busBwCount ? job.busBwSum / job.busBwCount : 0;
  const double minBw = minBandwidthCheck();
  if (job.printer) {
    std::fputs(footerText(program, job.outOfBounds, avgBusBw, minBw).c_str(), stdout);
    const char* lastError = ncclGetLastError(nullptr);
    if (lastError && *lastError) std::printf("# error: %s\n", lastError);
    else std::puts("");
    std::fflush(stdout);
    if (job.json) job.json->finish(job.outOfBounds, avgBusBw, minBw);
  }
  const bool bandwidthTooLow = minBw >= 0 && avgBusBw < minBw * 0.9;
  return (job.anyWrong || bandwidthTooLow) ? 7 : 0;
}

}  // namespace accl::perf
