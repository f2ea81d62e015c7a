// One thread's part of the run: it owns nGpus ranks (streams, buffers) and walks the same
// type -> op -> root -> size loops as every other thread, so exchanges line up. In device mode
// inputs are written to each buffer's host staging copy and uploaded, results downloaded
// before they are checked; the timed loop touches only the library and the streams.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "accl.h"
#include "cuda_graph.h"
#include "rank_resources.h"
#include "job.h"
#include "sweep.h"
#include "sweep_budget.h"
#include "table_format.h"

namespace accl::perf {
namespace {

using Clock = std::chrono::steady_clock;

struct RankContext {
  int rank = 0;
  int local = 0;  // index among this process's ranks
  ncclComm_t comm = nullptr;
  RankStream stream;
  RankBuffer send;
  RankBuffer recv;
  std::vector<void*> registrations;
  ncclRedOp_t op = ncclSum;
  bool ownsOp = false;
};

// What every rank reports after a measurement.
struct RankOutcome {
  double timeUs;
  double wrong;
};

struct Case {
  ncclDataType_t type;
  ReduceOp op;
  int root;
  size_t bytes;
};

class ThreadRun {
 public:
  ThreadRun(Job& job, int thread) : job_(job), thread_(thread), o_(job.options) {}

  void run() {
    setUp();
    const Collective& c = job_.collective;
    const std::vector<ReduceOp> ops = c.loopsOverOps() ? o_.ops : std::vector<ReduceOp>{ReduceOp::kSum};
    std::vector<int> roots = {-1};
    if (c.hasRoot()) {
      roots.clear();
      if (o_.root == -1)
        for (int r = 0; r < job_.nranks; ++r) roots.push_back(r);
      else
        roots.push_back(o_.root);
    }
    const std::vector<size_t> sizes = sweepSizes(o_.minBytes, o_.maxBytes, o_.stepBytes, o_.stepFactor);
    for (int cycle = 0; o_.runCycles == 0 || cycle < o_.runCycles; ++cycle) {
      for (ncclDataType_t type : o_.types)
        for (ReduceOp op : ops)
          for (int root : roots) {
            createOps(type, op);
            SweepBudget budget(o_.timeBudgetSec);
            if (!budget.active()) warmUp(type, root);
            for (size_t bytes : sizes) {
              if (budget.active()) {
                if (!budget.allows(bytes)) {
                  if (job_.printer && thread_ == 0) std::printf("%s\n", budget.stopNote(bytes).c_str());
                  break;
                }
                warmUpAt(type, root, bytes);  // a whole-range warm-up up front could spend the budget alone
              }
              const RowResult row = measureRow({type, op, root, bytes});
              budget.record(bytes, rowSeconds(row));
            }
            destroyOps();
          }
    }
    tearDown();
  }

 private:
  void setUp() {
    if (o_.parallelInit) initComms(job_, thread_ * o_.nGpus, o_.nGpus);
    job_.threadBarrier.arrive_and_wait();
    ranks_.resize(static_cast<size_t>(o_.nGpus));
    const size_t allocBytes = bufferBytes();
    for (int g = 0; g < o_.nGpus; ++g) {
      RankContext& r = ranks_[g];
      r.rank = job_.globalRank(thread_, g);
      r.local = thread_ * o_.nGpus + g;
      r.comm = job_.comms[r.local];
      makeCurrent(r);  // streams and memory belong to the rank's device
      std::string error;
      if (o_.streamNull) r.stream = RankStream::null(job_.cuda.get());
      else if (!RankStream::create(job_.cuda.get(), &r.stream, &error)) job_.failCuda(error, __FILE__, __LINE__);
      PERF_NCCL_CHECK(job_, RankBuffer::allocate(allocBytes, job_.cuda.get(), &r.send));
      PERF_NCCL_CHECK(job_, RankBuffer::allocate(allocBytes, job_.cuda.get(), &r.recv));
      if (o_.localRegister) {
        for (const RankBuffer* b : {&r.send, &r.recv}) {
          void* handle = nullptr;
          PERF_NCCL_CHECK(job_, ncclCommRegister(r.comm, b->data(), b->bytes(), &handle));
          r.registrations.push_back(handle);
        }
      }
    }
  }

  void tearDown() {
    for (RankContext& r : ranks_)
      for (void* h : r.registrations) PERF_NCCL_CHECK(job_, ncclCommDeregister(r.comm, h));
    ranks_.clear();
  }

  // Big enough for the largest row of every type, including the in-place layout and -u.
  size_t bufferBytes() const {
    size_t most = 0;
    for (ncclDataType_t type : o_.types)
      for (int g = 0; g < o_.nGpus; ++g) most = std::max(most, extentBytes(type, o_.maxBytes, job_.globalRank(thread_, g)));
    return most + static_cast<size_t>(o_.unalign) * 8 + 64;
  }

  size_t extentBytes(ncclDataType_t type, size_t bytes, int rank) const {
    const size_t e = typeSize(type);
    const Layout l = job_.collective.layout(bytes, e, job_.nranks, rank);
    return std::max({l.sendElems, l.recvElems, l.inPlaceSendOffset + l.sendElems, l.inPlaceRecvOffset + l.recvElems}) * e;
  }

  void createOps(ncclDataType_t type, ReduceOp op) {
    for (RankContext& r : ranks_) {
      r.ownsOp = op == ReduceOp::kMulSum && job_.collective.loopsOverOps();
      if (!r.ownsOp) {
        r.op = builtinOp(op);
        continue;
      }
      unsigned char scalar[8] = {};
      encodeValue(type, DataPattern::mulSumScalar(r.rank), scalar);
      PERF_NCCL_CHECK(job_, ncclRedOpCreatePreMulSum(&r.op, scalar, type, ncclScalarHostImmediate, r.comm));
    }
  }

  void destroyOps() {
    for (RankContext& r : ranks_)
      if (r.ownsOp) PERF_NCCL_CHECK(job_, ncclRedOpDestroy(r.op, r.comm));
  }

  // Device mode: the rank's device becomes current on this thread (nccl-tests' cudaSetDevice
  // before each rank's call), skipped when it already is.
  void makeCurrent(const RankContext& r) {
    if (!job_.cuda || job_.deviceOf(r.local) == currentDevice_) return;
    job_.makeCurrent(r.local);
    currentDevice_ = job_.deviceOf(r.local);
  }

  // A region of one call: `offset` bytes into `buffer`.
  struct Place {
    const RankBuffer* buffer;
    size_t offset;
    char* library() const { return buffer->data() + offset; }  // what the collective gets
    char* host() const { return buffer->hostView() + offset; }  // what the harness fills and checks
  };
  // The send and result regions of one call, `shift` bytes into the buffers.
  struct Regions {
    Place send;
    Place result;
  };
  Regions regions(const RankContext& r, const Layout& l, size_t elemSize, bool inPlace, size_t shift) const {
    const size_t skew = static_cast<size_t>(o_.unalign) * elemSize;
    const size_t recvBase = skew + shift;
    if (!inPlace) return {{&r.send, skew + shift}, {&r.recv, recvBase}};
    return {{&r.recv, recvBase + l.inPlaceSendOffset * elemSize}, {&r.recv, recvBase + l.inPlaceRecvOffset * elemSize}};
  }

  void issue(const Case& k, bool inPlace, size_t iteration) {
    const Collective& c = job_.collective;
    const size_t e = typeSize(k.type);
    for (int phase = 0; phase < c.phases(job_.nranks); ++phase) {
      if (o_.nGpus > 1) PERF_NCCL_CHECK(job_, ncclGroupStart());
      for (RankContext& r : ranks_) {
        const Layout l = c.layout(k.bytes, e, job_.nranks, r.rank);
        const size_t extent = extentBytes(k.type, k.bytes, r.rank);
        const size_t steps = extent ? std::max<size_t>(1, (r.recv.bytes() - 64 - o_.unalign * 8) / extent) : 1;
        const Regions at = regions(r, l, e, inPlace, extent * (iteration % steps));
        makeCurrent(r);
        const CallArgs args{at.send.library(), at.result.library(), l.count, k.type, r.op, k.root, r.rank,
                            job_.nranks, r.comm, r.stream.get()};
        PERF_NCCL_CHECK(job_, c.call(args, phase));
      }
      if (o_.nGpus > 1) PERF_NCCL_CHECK(job_, ncclGroupEnd());
    }
  }

  void waitAll() {
    const auto start = Clock::now();
    std::string error;
    for (RankContext& r : ranks_) {
      makeCurrent(r);  // a NULL stream under CUDA is the current context's default stream
      if (o_.timeoutSec <= 0) {
        if (!r.stream.synchronize(&error)) job_.failCuda(error, __FILE__, __LINE__);
        continue;
      }
      for (;;) {
        const RankStream::State state = r.stream.query(&error);
        if (state == RankStream::State::kDone) break;
        if (state == RankStream::State::kFailed) job_.failCuda(error, __FILE__, __LINE__);
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(r.comm, &async);
        if (async != ncclSuccess && async != ncclInProgress) job_.failNccl(async, "ncclCommGetAsyncError", __FILE__, __LINE__);
        if (Clock::now() - start > std::chrono::seconds(o_.timeoutSec)) {
          for (RankContext& a : ranks_) ncclCommAbort(a.comm);
          job_.fail(4, "Test timeout (" + std::to_string(o_.timeoutSec) + "s) waiting for completion", __FILE__,
                    __LINE__);
        }
        std::this_thread::yield();
      }
    }
  }

  void beginCapture(StreamGraphs& graphs, StreamGraphs::CaptureMode mode) {
    std::vector<cudaStream_t> streams;
    for (const RankContext& r : ranks_) streams.push_back(r.stream.get());
    std::string error;
    if (!graphs.begin(streams, mode, &error)) job_.failCuda(error, __FILE__, __LINE__);
  }
  void endCapture(StreamGraphs& graphs) {
    std::string error;
    if (!graphs.end(&error)) job_.failCuda(error, __FILE__, __LINE__);
  }
  void launch(StreamGraphs& graphs) {
    std::string error;
    if (!graphs.launch(&error)) job_.failCuda(error, __FILE__, __LINE__);
  }

  void warmUp(ncclDataType_t type, int root) {
    for (size_t bytes : warmupSizes(o_.minBytes, o_.maxBytes)) {
      for (int i = 0; i < o_.warmupIters; ++i) issue({type, ReduceOp::kSum, root, bytes}, false, 0);
      waitAll();
    }
    job_.barrier(thread_);
  }

  // --time-budget: warm-up at one size only, just before its row.
  void warmUpAt(ncclDataType_t type, int root, size_t bytes) {
    for (int i = 0; i < o_.warmupIters; ++i) issue({type, ReduceOp::kSum, root, bytes}, false, 0);
    waitAll();
    job_.barrier(thread_);
  }

  // What a row cost in collective time, from its combined (so every rank's same) times: its
  // warm-up, timed and checked calls, out of place and in place.
  double rowSeconds(const RowResult& row) const {
    const double calls = o_.warmupIters + static_cast<double>(o_.iters) * o_.aggIters * std::max(1, o_.cudaGraph) + o_.check;
    return calls * (row.outOfPlace.timeUs + row.inPlace.timeUs) * 1e-6;
  }

  void fillInputs(const Case& k, bool inPlace, uint64_t seed) {
    const Collective& c = job_.collective;
    const size_t e = typeSize(k.type);
    const DataPattern pattern(k.type, k.op, c.reduces(), job_.nranks, seed);
    std::string error;
    for (RankContext& r : ranks_) {
      const Layout l = c.layout(k.bytes, e, job_.nranks, r.rank);
      const Regions at = regions(r, l, e, inPlace, 0);
      makeCurrent(r);
      fillInput(pattern, r.rank, 0, l.sendElems, at.send.host());
      if (!at.send.buffer->upload(at.send.offset, l.sendElems * e, &error)) job_.failCuda(error, __FILE__, __LINE__);
      if (inPlace) continue;
      fillInput(DataPattern(k.type, k.op, false, 1, seed ^ 0x5eed), r.rank, 0, l.recvElems, at.result.host());
      if (!at.result.buffer->upload(at.result.offset, l.recvElems * e, &error)) job_.failCuda(error, __FILE__, __LINE__);
    }
  }

  // Mismatching elements of each local rank (0 where the rank holds no result).
  std::vector<double> verify(const Case& k, bool inPlace, uint64_t seed) {
    const Collective& c = job_.collective;
    const size_t e = typeSize(k.type);
    const DataPattern pattern(k.type, k.op, c.reduces(), job_.nranks, seed);
    const bool averaging = c.reduces() && k.op == ReduceOp::kAvg;
    std::vector<double> wrong;
    for (RankContext& r : ranks_) {
      double bad = 0;
      const Layout l = c.layout(k.bytes, e, job_.nranks, r.rank);
      if (c.checksRank(r.rank, k.root)) {
        const Regions at = regions(r, l, e, inPlace, 0);
        makeCurrent(r);
        std::string error;
        if (!at.result.buffer->download(at.result.offset, l.recvElems * e, &error))
          job_.failCuda(error, __FILE__, __LINE__);
        char* result = at.result.host();
        if (job_.corruptResults && l.recvElems > 0) result[e - 1] ^= 0x40;
        unsigned char want[8];
        for (size_t i = 0; i < l.recvElems; ++i) {
          encodeValue(k.type, c.expected(pattern, l, r.rank, job_.nranks, k.root, i), want);
          const uint64_t distance = ulpDistance(k.type, want, result + i * e);
          if (distance > (averaging ? 2u : 0u)) ++bad;
        }
      }
      wrong.push_back(bad);
    }
    return wrong;
  }

  PlacementResult measure(const Case& k, bool inPlace) {
    const bool checking = o_.check > 0;
    if (checking) fillInputs(k, inPlace, ++seed_);
    issue(k, inPlace, 0);
    waitAll();
    job_.barrier(thread_);

    // -G: the timed iterations are captured, not run; the clock restarts at the launches.
    const bool graphing = o_.cudaGraph > 0;
    StreamGraphs graphs(job_.cuda.get());  // used only with -G, which needs device mode
    if (graphing) beginCapture(graphs, StreamGraphs::CaptureMode::kThreadLocal);
    auto start = Clock::now();
    Clock::duration excluded{};
    for (int it = 0; it < o_.iters; ++it) {
      if (o_.aggIters > 1) PERF_NCCL_CHECK(job_, ncclGroupStart());
      for (int a = 0; a < o_.aggIters; ++a) issue(k, inPlace, static_cast<size_t>(it));
      if (o_.aggIters > 1) PERF_NCCL_CHECK(job_, ncclGroupEnd());
      if (o_.blocking) {
        waitAll();
        if (o_.blocking == 1) job_.barrier(thread_);
        if (o_.blocking == 3) {
          const auto barrierStart = Clock::now();
          job_.barrier(thread_);
          excluded += Clock::now() - barrierStart;
        }
      }
    }
    if (graphing) {
      endCapture(graphs);
      job_.barrier(thread_);
      start = Clock::now();
      for (int l = 0; l < o_.cudaGraph; ++l) launch(graphs);
    }
    const auto issued = Clock::now();
    waitAll();
    const auto done = Clock::now();
    const auto elapsed = (o_.reportCpuTime ? issued - start : done - start) - excluded;
    // Per iteration, also with -G (nccl-tests divides its -C cputime by the launches only in
    // its completion time; here both are per iteration).
    const double ops = static_cast<double>(o_.iters) * o_.aggIters * (graphing ? o_.cudaGraph : 1);
    const double timeUs = ops > 0 ? std::chrono::duration<double, std::micro>(elapsed).count() / ops : 0;

    std::vector<double> wrong(ranks_.size(), 0);
    for (int run = 0; run < o_.check; ++run) {
      fillInputs(k, inPlace, ++seed_);
      if (graphing) {
        // The checked call is a graph too, launched once (nccl-tests: global capture mode
        // unless several threads capture at once).
        StreamGraphs check(job_.cuda.get());
        beginCapture(check, o_.nThreads > 1 ? StreamGraphs::CaptureMode::kThreadLocal
                                             : StreamGraphs::CaptureMode::kGlobal);
        issue(k, inPlace, 0);
        endCapture(check);
        launch(check);
        waitAll();
      } else {
        issue(k, inPlace, 0);
        waitAll();
      }
      wrong = verify(k, inPlace, seed_);
    }

    std::vector<RankOutcome> mine;
    for (size_t i = 0; i < ranks_.size(); ++i) mine.push_back({timeUs, wrong[i]});
    const std::vector<RankOutcome> all = job_.gatherAll<RankOutcome>(thread_, mine);
    return combine(k, all, checking);
  }

  PlacementResult combine(const Case& k, const std::vector<RankOutcome>& all, bool checking) {
    PlacementResult p;
    double sum = 0, lo = all[0].timeUs, hi = all[0].timeUs, wrongTotal = 0;
    int ranksWrong = 0;
    for (const RankOutcome& r : all) {
      sum += r.timeUs;
      lo = std::min(lo, r.timeUs);
      hi = std::max(hi, r.timeUs);
      wrongTotal += r.wrong;
      ranksWrong += r.wrong > 0;
    }
    switch (o_.average) {
      case 0: p.timeUs = all[0].timeUs; break;
      case 2: p.timeUs = lo; break;
      case 3: p.timeUs = hi; break;
      default: p.timeUs = sum / all.size(); break;
    }
    const Layout l = job_.collective.layout(k.bytes, typeSize(k.type), job_.nranks, 0);
    p.algBw = p.timeUs > 0 ? static_cast<double>(l.algBytes) / 1e3 / p.timeUs : 0;
    p.busBw = p.algBw * job_.collective.busBwFactor(job_.nranks);
    p.wrong = checking ? wrongTotal : -1;
    if (thread_ == 0) {
      if (ranksWrong) job_.anyWrong = true;
      job_.outOfBounds += ranksWrong;
      job_.busBwSum += p.busBw;
      ++job_.busBwCount;
    }
    return p;
  }

  RowResult measureRow(const Case& k) {
    const Collective& c = job_.collective;
    const Layout l = c.layout(k.bytes, typeSize(k.type), job_.nranks, 0);
    RowResult row;
    row.bytes = l.sizeBytes;
    row.count = l.count;
    row.type = std::string(typeName(k.type));
    row.op = c.redopColumn() == RedopColumn::kOpName ? std::string(opName(k.op))
             : c.redopColumn() == RedopColumn::kNone ? "none"
                                                      : "";
    row.root = k.root;
    const bool printing = job_.printer && thread_ == 0;
    if (printing) std::fputs(rowPreamble(row.bytes, row.count, row.type, row.op, row.root).c_str(), stdout);
    row.outOfPlace = measure(k, false);
    if (printing) {
      std::fputs(rowBody(row.outOfPlace.timeUs, row.outOfPlace.algBw, row.outOfPlace.busBw, row.outOfPlace.wrong).c_str(), stdout);
      std::fflush(stdout);
    }
    row.inPlace = measure(k, true);
    if (printing) {
      std::fputs(rowBody(row.inPlace.timeUs, row.inPlace.algBw, row.inPlace.busBw, row.inPlace.wrong).c_str(), stdout);
      if (o_.reportTimestamps) std::fputs(timestampColumn().c_str(), stdout);
      std::fputs("\n", stdout);
      std::fflush(stdout);
      if (job_.json) job_.json->addRow(row);
    }
    return row;
  }

  Job& job_;
  int thread_;
  const Options& o_;
  std::vector<RankContext> ranks_;
  uint64_t seed_ = 0;
  int currentDevice_ = -1;  // device mode: the device current on this thread
};

}  // namespace

void runThread(Job& job, int thread) { ThreadRun(job, thread).run(); }

}  // namespace accl::perf
