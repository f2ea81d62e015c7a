// Unit tests of the perf harness pieces that need no working collectives: option parsing,
// size sweeps, number fitting and table layout, data patterns and expected values, busbw
// factors and layouts of every collective, JSON quoting.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "collectives/registry.h"
#include "harness/buffer_mode.h"
#include "harness/data_pattern.h"
#include "harness/datatype.h"
#include "harness/json_report.h"
#include "harness/world.h"
#include "harness/options.h"
#include "harness/rank_resources.h"
#include "harness/sweep.h"
#include "harness/sweep_budget.h"
#include "harness/table_format.h"

namespace accl::perf {
namespace {

ParseResult parse(std::vector<std::string> args) {
  args.insert(args.begin(), "all_reduce_perf");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return parseOptions(static_cast<int>(args.size()), argv.data());
}

TEST(PerfOptions, DefaultsMatchNcclTests) {
  const Options o = parse({}).options;
  EXPECT_EQ(o.nThreads, 1);
  EXPECT_EQ(o.nGpus, 1);
  EXPECT_EQ(o.minBytes, 32u << 20);
  EXPECT_EQ(o.maxBytes, 32u << 20);
  EXPECT_EQ(o.stepBytes, 1u << 20);
  EXPECT_EQ(o.stepFactor, 1u);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmupIters, 1);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.average, 1);
  EXPECT_EQ(o.types, std::vector<ncclDataType_t>{ncclFloat32});
}

TEST(PerfOptions, ShortAndLongFormsSetTheSameFields) {
  const ParseResult s = parse({"-b", "8", "-e", "1M", "-f", "2", "-g", "2", "-t", "3", "-n", "5", "-w", "0", "-c",
                               "0", "-o", "max", "-d", "int32", "-r", "1", "-z", "1", "-a", "3", "-m", "2", "-p", "1",
                               "-N", "2", "-C", "1", "-R", "1", "-J", "out.json"});
  ASSERT_TRUE(s.error.empty()) << s.error;
  const ParseResult l = parse({"--minbytes", "8", "--maxbytes", "1M", "--stepfactor", "2", "--ngpus", "2",
                               "--nthreads", "3", "--iters", "5", "--warmup_iters", "0", "--check", "0", "--op", "max",
                               "--datatype", "int32", "--root", "1", "--blocking", "1", "--average", "3",
                               "--agg_iters", "2", "--parallel_init", "1", "--run_cycles", "2", "--report_cputime",
                               "1", "--local_register", "1", "--json", "out.json"});
  ASSERT_TRUE(l.error.empty()) << l.error;
  for (const Options* o : {&s.options, &l.options}) {
    EXPECT_EQ(o->minBytes, 8u);
    EXPECT_EQ(o->maxBytes, 1u << 20);
    EXPECT_EQ(o->stepFactor, 2u);
    EXPECT_EQ(o->nGpus, 2);
    EXPECT_EQ(o->nThreads, 3);
    EXPECT_EQ(o->iters, 5);
    EXPECT_EQ(o->warmupIters, 0);
    EXPECT_EQ(o->check, 0);
    EXPECT_EQ(o->ops, std::vector<ReduceOp>{ReduceOp::kMax});
    EXPECT_EQ(o->types, std::vector<ncclDataType_t>{ncclInt32});
    EXPECT_EQ(o->root, 1);
    EXPECT_EQ(o->blocking, 1);
    EXPECT_EQ(o->average, 3);
    EXPECT_EQ(o->aggIters, 2);
    EXPECT_EQ(o->parallelInit, 1);
    EXPECT_EQ(o->runCycles, 2);
    EXPECT_EQ(o->reportCpuTime, 1);
    EXPECT_EQ(o->localRegister, 1);
    EXPECT_EQ(o->jsonPath, "out.json");
  }
  EXPECT_EQ(parse({"--output_file", "x.json"}).options.jsonPath, "x.json");
}

TEST(PerfOptions, SizesTakeBinarySuffixesAndFractions) {
  EXPECT_EQ(parseSize("8"), 8u);
  EXPECT_EQ(parseSize("1K"), 1024u);
  EXPECT_EQ(parseSize("1k"), 1024u);
  EXPECT_EQ(parseSize("2M"), 2u << 20);
  EXPECT_EQ(parseSize("1G"), 1u << 30);
  EXPECT_EQ(parseSize("1.5K"), 1536u);
  EXPECT_FALSE(parseSize("abc").has_value());
  EXPECT_FALSE(parseSize("1X").has_value());
  EXPECT_FALSE(parseSize("").has_value());
}

TEST(PerfOptions, BadInputIsAnErrorAndAllExpands) {
  EXPECT_FALSE(parse({"-b", "1M", "-e", "8"}).error.empty());
  EXPECT_FALSE(parse({"-b", "12Q"}).error.empty());
  EXPECT_FALSE(parse({"-o", "xor"}).error.empty());
  EXPECT_FALSE(parse({"--bogus", "1"}).error.empty());
  EXPECT_TRUE(parse({"-h"}).helpRequested);
  EXPECT_EQ(parse({"-o", "all"}).options.ops.size(), 6u);
  EXPECT_EQ(parse({"-d", "all"}).options.types.size(), 12u);
  const ParseResult unknownType = parse({"-d", "complex"});
  EXPECT_TRUE(unknownType.error.empty());
  EXPECT_EQ(unknownType.options.types, std::vector<ncclDataType_t>{ncclFloat32});
}

TEST(PerfOptions, TimeBudgetTakesPositiveSecondsAndOneCycle) {
  EXPECT_EQ(parse({}).options.timeBudgetSec, 0.0);
  EXPECT_EQ(parse({"--time-budget", "7.5"}).options.timeBudgetSec, 7.5);
  EXPECT_FALSE(parse({"--time-budget", "0"}).error.empty());
  EXPECT_FALSE(parse({"--time-budget", "-3"}).error.empty());
  EXPECT_FALSE(parse({"--time-budget", "soon"}).error.empty());
  EXPECT_FALSE(parse({"--time-budget", "5", "-N", "0"}).error.empty());
}

// Rows of 1 s at 1 KiB doubling: the prediction scales with size, so a 10 s budget takes
// 1, 2, 4 KiB (7 s) and stops before 8 KiB (predicted 8 s more); small rows never predict less
// than the last row took.
TEST(SweepBudget, StopsBeforeTheFirstRowPredictedToOverrunAndNamesTheLargestSize) {
  SweepBudget budget(10);
  ASSERT_TRUE(budget.active());
  EXPECT_TRUE(budget.allows(1024));
  budget.record(1024, 1.0);
  EXPECT_TRUE(budget.allows(2048));
  budget.record(2048, 2.0);
  EXPECT_TRUE(budget.allows(4096));
  budget.record(4096, 4.0);
  EXPECT_DOUBLE_EQ(budget.predicted(8192), 8.0);
  EXPECT_FALSE(budget.allows(8192));
  EXPECT_DOUBLE_EQ(budget.predicted(8), 4.0);
  const std::string note = budget.stopNote(8192);
  EXPECT_NE(note.find("stopped before 8192 bytes"), std::string::npos) << note;
  EXPECT_NE(note.find("largest size: 4096 bytes"), std::string::npos) << note;
  EXPECT_TRUE(SweepBudget(0).allows(size_t{1} << 40));
  EXPECT_FALSE(SweepBudget(0).active());
}

// -G is kept (graph launches); blocking modes, which would synchronize a stream while it is
// captured, are turned off with a note, as nccl-tests does for -z 3.
TEST(PerfOptions, CudaGraphModeKeepsLaunchesAndDropsBlocking) {
  const ParseResult graph = parse({"-G", "5", "-z", "3"});
  ASSERT_TRUE(graph.error.empty());
  EXPECT_EQ(graph.options.cudaGraph, 5);
  EXPECT_EQ(graph.options.blocking, 0);
  ASSERT_EQ(graph.notes.size(), 1u);
  EXPECT_NE(graph.notes[0].find("-z 3"), std::string::npos) << graph.notes[0];
  EXPECT_EQ(parse({"--cudagraph", "2", "-z", "1"}).options.blocking, 0);
  EXPECT_EQ(parse({"-z", "1"}).options.blocking, 1);  // without -G it stays
  EXPECT_TRUE(parse({"-G", "2"}).notes.empty());
  EXPECT_FALSE(parse({"-G", "-1"}).error.empty());
}

TEST(PerfSweep, FactorMultipliesAndStepAdds) {
  EXPECT_EQ(sweepSizes(8, 64, 1 << 20, 2), (std::vector<size_t>{8, 16, 32, 64}));
  EXPECT_EQ(sweepSizes(8, 1 << 20, 0, 4), (std::vector<size_t>{8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288}));
  EXPECT_EQ(sweepSizes(100, 350, 100, 1), (std::vector<size_t>{100, 200, 300}));
  EXPECT_EQ(sweepSizes(64, 64, 0, 1), (std::vector<size_t>{64}));  // zero step: one size
  EXPECT_EQ(warmupSizes(8, 40), (std::vector<size_t>{8, 16, 32}));
}

TEST(PerfTable, NumbersFitTheirColumnLikeNcclTests) {
  EXPECT_EQ(fitNumber(12.345, 7), "  12.35");
  EXPECT_EQ(fitNumber(1234.56, 7), "1234.56");
  EXPECT_EQ(fitNumber(12345.6, 7), "12345.6");
  EXPECT_EQ(fitNumber(123456.7, 7), " 123457");
  EXPECT_EQ(fitNumber(12345678.0, 7), "1.2e+07");
  EXPECT_EQ(fitNumber(0.0, 6), "  0.00");
  EXPECT_EQ(fitNumber(47.56, 6), " 47.56");
  EXPECT_EQ(fitNumber(123.45, 6), "123.45");
  EXPECT_EQ(fitNumber(1234.5, 6), "1234.5");
  EXPECT_EQ(fitNumber(1234567.0, 6), " 1e+06");
}

TEST(PerfTable, RowAndHeaderLayoutMatchNcclTests) {
  const std::string row = rowPreamble(33554432, 8388608, "float", "sum", -1) + rowBody(1234.56, 27.18, 47.56, 0) +
                          rowBody(1230.10, 27.28, 47.74, 0);
  EXPECT_EQ(row,
            "    33554432       8388608     float     sum      -1  1234.56   27.18   47.56       0  1230.10   27.28   "
            "47.74       0");
  EXPECT_EQ(rowBody(1.0, 2.0, 3.0, -1), "     1.00    2.00    3.00    N/A");
  const std::string header = tableHeader(false, false);
  EXPECT_NE(header.find("#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
                        "time   algbw   busbw  #wrong \n"),
            std::string::npos);
  EXPECT_NE(header.find("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             "
                        "(us)  (GB/s)  (GB/s)         \n"),
            std::string::npos);
  EXPECT_NE(tableHeader(true, false).find("cputime"), std::string::npos);
  EXPECT_EQ(footerText("all_reduce_perf", 0, 47.6512, -1),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 47.6512 \n#\n"
            "# Collective test concluded: all_reduce_perf\n#\n");
  EXPECT_EQ(deviceLine(0, 0, 12345, "hostname", 0, "NVIDIA H200"),
            "#  Rank  0 Group  0 Pid  12345 on   hostname device  0 [0000:00:00] NVIDIA H200\n");
  const unsigned pci[3] = {0, 0x19, 0};
  EXPECT_EQ(deviceLine(3, 0, 12345, "hostname", 0, "NVIDIA H200", pci),
            "#  Rank  3 Group  0 Pid  12345 on   hostname device  0 [0000:19:00] NVIDIA H200\n");
}

TEST(PerfBufferMode, FlagBeatsEnvironmentAndZeroMeansUnset) {
  EXPECT_EQ(parse({"--host"}).options.buffers, BufferRequest::kHost);
  EXPECT_EQ(parse({"--device"}).options.buffers, BufferRequest::kDevice);
  EXPECT_EQ(parse({"--device", "--host"}).options.buffers, BufferRequest::kHost);  // the last one wins
  EXPECT_EQ(parse({}).options.buffers, BufferRequest::kAuto);
  EXPECT_EQ(bufferRequest(BufferRequest::kDevice, "1", nullptr), BufferRequest::kDevice);
  EXPECT_EQ(bufferRequest(BufferRequest::kAuto, "1", "1"), BufferRequest::kHost);
  EXPECT_EQ(bufferRequest(BufferRequest::kAuto, "0", "1"), BufferRequest::kDevice);
  EXPECT_EQ(bufferRequest(BufferRequest::kAuto, "", "0"), BufferRequest::kAuto);
}

TEST(PerfBufferMode, DeviceMemoryOnlyWhenTheLibraryHandsItOut) {
  BufferFacts gpu;
  gpu.driverLoaded = true;
  gpu.deviceCount = 1;
  gpu.probed = true;
  gpu.libraryGivesDeviceMemory = true;
  const BufferMode automatic = decideBufferMode(BufferRequest::kAuto, gpu);
  EXPECT_TRUE(automatic.device);
  EXPECT_TRUE(automatic.error.empty());
  EXPECT_NE(automatic.why.find("device memory"), std::string::npos) << automatic.why;

  // Each missing fact gives host memory, says which, and makes --device an error naming it.
  struct Case {
    const char* name;
    BufferFacts facts;
    BufferRequest request;
    const char* reason;
  };
  BufferFacts noDriver;
  noDriver.driverWhy = "no CUDA driver (libcuda.so.1: not found)";
  BufferFacts noDevice = gpu;
  noDevice.deviceCount = 0;
  BufferFacts hostLibrary = gpu;
  hostLibrary.libraryGivesDeviceMemory = false;
  hostLibrary.probeWhy = "ncclMemAlloc returned host memory";
  BufferFacts backendHost = gpu;
  backendHost.backendSetting = "host";
  const Case cases[] = {
      {"forced host", gpu, BufferRequest::kHost, "--host"},
      {"ACCL_BACKEND=host", backendHost, BufferRequest::kDevice, "ACCL_BACKEND=host"},
      {"no driver", noDriver, BufferRequest::kDevice, "libcuda.so.1: not found"},
      {"no device", noDevice, BufferRequest::kDevice, "no CUDA device"},
      {"host backend", hostLibrary, BufferRequest::kDevice, "ncclMemAlloc returned host memory"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const BufferMode m = decideBufferMode(c.request, c.facts);
    EXPECT_FALSE(m.device);
    EXPECT_NE(m.why.find("host memory"), std::string::npos) << m.why;
    EXPECT_NE(m.why.find(c.reason), std::string::npos) << m.why;
    EXPECT_EQ(m.error.empty(), c.request != BufferRequest::kDevice) << m.error;
    if (!m.error.empty()) {
      EXPECT_NE(m.error.find(c.reason), std::string::npos) << m.error;
    }
  }
  // A probe that could not run leaves the memory kind unknown: the run stops, whatever was asked.
  BufferFacts probeFailed = gpu;
  probeFailed.libraryGivesDeviceMemory = false;
  probeFailed.probeFailed = true;
  probeFailed.probeWhy = "ncclMemAlloc failed: unhandled cuda error";
  for (BufferRequest r : {BufferRequest::kAuto, BufferRequest::kDevice}) {
    const BufferMode m = decideBufferMode(r, probeFailed);
    EXPECT_FALSE(m.device);
    EXPECT_NE(m.error.find("ncclMemAlloc failed: unhandled cuda error"), std::string::npos) << m.error;
  }
  EXPECT_TRUE(decideBufferMode(BufferRequest::kHost, probeFailed).error.empty());
  EXPECT_FALSE(wantsDriver(BufferRequest::kHost, ""));
  EXPECT_FALSE(wantsDriver(BufferRequest::kAuto, "host"));
  EXPECT_TRUE(wantsDriver(BufferRequest::kAuto, "auto"));
}

TEST(PerfTable, PreambleNamesStepKind) {
  Options o;
  o.minBytes = 8;
  o.maxBytes = 64;
  EXPECT_NE(preambleText("all_reduce_perf", o, 22707, 22707)
                .find("# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 1048576(bytes) warmup iters: 1 iters: 20 agg "
                      "iters: 1 validation: 1 graph: 0 unalign: 0\n"),
            std::string::npos);
  o.stepFactor = 2;
  EXPECT_NE(preambleText("all_reduce_perf", o, 1, 1).find("step: 2(factor)"), std::string::npos);
}

TEST(PerfDatatype, NarrowFloatsEncodeExactly) {
  unsigned char b[8];
  auto bits16 = [&](ncclDataType_t t, double v) {
    encodeValue(t, v, b);
    uint16_t x;
    std::memcpy(&x, b, 2);
    return x;
  };
  EXPECT_EQ(bits16(ncclFloat16, 1.0), 0x3C00);
  EXPECT_EQ(bits16(ncclFloat16, 2048.0), 0x6800);
  EXPECT_EQ(bits16(ncclFloat16, -2.5), 0xC100);
  EXPECT_EQ(bits16(ncclBfloat16, 1.0), 0x3F80);
  EXPECT_EQ(bits16(ncclBfloat16, 3.0), 0x4040);
  encodeValue(ncclFloat8e4m3, 1.0, b);
  EXPECT_EQ(b[0], 0x38);
  encodeValue(ncclFloat8e4m3, 448.0, b);
  EXPECT_EQ(b[0], 0x7E);
  encodeValue(ncclFloat8e5m2, 1.0, b);
  EXPECT_EQ(b[0], 0x3C);
  encodeValue(ncclFloat8e5m2, 57344.0, b);
  EXPECT_EQ(b[0], 0x7B);
  // Round to nearest even: 1 + 1/16 is a tie between 1 and 1.125 in e4m3.
  encodeValue(ncclFloat8e4m3, 1.0625, b);
  EXPECT_EQ(b[0], 0x38);
  encodeValue(ncclInt8, -1.0, b);
  EXPECT_EQ(b[0], 0xFF);
}

TEST(PerfDatatype, UlpDistanceCountsNeighbours) {
  float a = 1.0f, b = std::nextafter(std::nextafter(1.0f, 2.0f), 2.0f);
  EXPECT_EQ(ulpDistance(ncclFloat32, &a, &a), 0u);
  EXPECT_EQ(ulpDistance(ncclFloat32, &a, &b), 2u);
  int32_t x = 3, y = 4;
  EXPECT_GT(ulpDistance(ncclInt32, &x, &y), 2u);
}

TEST(PerfDataPattern, SumsStayExactForEveryTypeAndRankCount) {
  for (ncclDataType_t type : allTypes()) {
    for (int n : {1, 2, 3, 8, 64}) {
      for (ReduceOp op : allOps()) {
        const DataPattern p(type, op, true, n, 7);
        for (size_t i = 0; i < 200; ++i) {
          const double r = p.reduced(i);
          if (op == ReduceOp::kAvg) continue;
          EXPECT_LE(r, static_cast<double>(exactIntegerLimit(type))) << typeName(type) << " n=" << n;
          EXPECT_EQ(r, std::floor(r));
        }
      }
    }
  }
}

TEST(PerfDataPattern, SeedsChangeTheData) {
  const DataPattern a(ncclFloat32, ReduceOp::kSum, true, 4, 1), b(ncclFloat32, ReduceOp::kSum, true, 4, 2);
  int differ = 0;
  for (size_t i = 0; i < 100; ++i) differ += a.input(1, i) != b.input(1, i);
  EXPECT_GT(differ, 50);
}

TEST(PerfCollectives, BusBandwidthFactorsMatchNcclTests) {
  const int n = 4;
  EXPECT_DOUBLE_EQ(allReduceCollective().busBwFactor(n), 2.0 * 3 / 4);
  for (const Collective* c : {&allGatherCollective(), &reduceScatterCollective(), &allToAllCollective(),
                              &gatherCollective(), &scatterCollective()})
    EXPECT_DOUBLE_EQ(c->busBwFactor(n), 3.0 / 4) << c->name();
  for (const Collective* c : {&broadcastCollective(), &reduceCollective(), &sendRecvCollective(),
                              &hypercubeCollective()})
    EXPECT_DOUBLE_EQ(c->busBwFactor(n), 1.0) << c->name();
}

TEST(PerfCollectives, CountsAndInPlaceLayouts) {
  // all_gather: rounded per-rank count, size = n*c*E, in place send = recv + rank*c.
  Layout l = allGatherCollective().layout(1 << 20, 4, 4, 2);
  EXPECT_EQ(l.count, 65536u);
  EXPECT_EQ(l.sizeBytes, 1u << 20);
  EXPECT_EQ(l.inPlaceSendOffset, 2 * 65536u);
  // Rounded down to 16-byte blocks: 1000 B / 4 B / 3 ranks = 83 -> 80 elements.
  EXPECT_EQ(allGatherCollective().layout(1000, 4, 3, 0).count, 80u);
  EXPECT_EQ(allGatherCollective().layout(8, 4, 2, 0).count, 0u);
  l = reduceScatterCollective().layout(1 << 20, 4, 4, 3);
  EXPECT_EQ(l.sendElems, 4 * l.count);
  EXPECT_EQ(l.inPlaceRecvOffset, 3 * l.count);
  l = allReduceCollective().layout(1000, 4, 3, 0);
  EXPECT_EQ(l.count, 250u);
  EXPECT_EQ(l.sizeBytes, 1000u);
  l = hypercubeCollective().layout(1 << 20, 4, 4, 0);
  EXPECT_EQ(l.algBytes, 3 * l.count * 4);
  EXPECT_EQ(l.sizeBytes, 4 * l.count * 4);
  EXPECT_EQ(hypercubeCollective().phases(8), 3);
  EXPECT_FALSE(hypercubeCollective().unsupportedReason(3).empty());
  EXPECT_TRUE(hypercubeCollective().unsupportedReason(4).empty());
}

TEST(PerfCollectives, RegistryKnowsEveryBinary) {
  std::set<std::string> names;
  for (const Collective* c : allCollectives()) names.insert(c->name());
  EXPECT_EQ(names, (std::set<std::string>{"all_reduce_perf", "all_gather_perf", "broadcast_perf", "reduce_perf",
                                          "reduce_scatter_perf", "sendrecv_perf", "alltoall_perf", "gather_perf",
                                          "scatter_perf", "hypercube_perf"}));
  EXPECT_EQ(findCollective("all_reduce_perf"), &allReduceCollective());
  EXPECT_EQ(findCollective("nope"), nullptr);
}

TEST(PerfCollectives, ExpectedResultsFollowTheDataMovement) {
  const int n = 4;
  const DataPattern p(ncclInt32, ReduceOp::kSum, false, n, 3);
  const Layout l = allToAllCollective().layout(n * 16 * 4, 4, n, 1);
  // Rank 1's block from peer 2 is peer 2's block 1.
  EXPECT_EQ(allToAllCollective().expected(p, l, 1, n, -1, 2 * l.count + 5), p.input(2, l.count + 5));
  EXPECT_EQ(sendRecvCollective().expected(p, l, 0, n, -1, 7), p.input(3, 7));
  EXPECT_EQ(scatterCollective().expected(p, l, 2, n, 1, 3), p.input(1, 2 * scatterCollective().layout(n * 16 * 4, 4, n, 2).count + 3));
  EXPECT_TRUE(reduceCollective().checksRank(2, 2));
  EXPECT_FALSE(reduceCollective().checksRank(1, 2));
}

TEST(PerfJson, QuotesAndNumbers) {
  EXPECT_EQ(jsonQuote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(jsonNumber(NAN), "null");
  EXPECT_EQ(jsonNumber(1.5), "1.500000");
}

}  // namespace
}  // namespace accl::perf

TEST(PerfWorld, AnMpiLaunchWithoutMpiSupportSaysHowToGetIt) {
  const std::string problem = accl::perf::mpiLaunchProblem("OMPI_COMM_WORLD_SIZE", false, "");
  EXPECT_NE(problem.find("OMPI_COMM_WORLD_SIZE is set"), std::string::npos) << problem;
  EXPECT_NE(problem.find("no MPI support"), std::string::npos) << problem;
  EXPECT_NE(problem.find("libopenmpi-dev"), std::string::npos) << problem;
  EXPECT_NE(problem.find("make deps"), std::string::npos) << problem;
  // Fine: MPI built in, or an out-of-band address to meet by, or no MPI launcher at all.
  EXPECT_EQ(accl::perf::mpiLaunchProblem("OMPI_COMM_WORLD_SIZE", true, ""), "");
  EXPECT_EQ(accl::perf::mpiLaunchProblem("PMI_SIZE", false, "10.0.0.1:2001"), "");
  EXPECT_EQ(accl::perf::mpiLaunchProblem(nullptr, false, ""), "");
}

TEST(PerfWorld, MpiLaunchersAreRecognisedByTheirVariables) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) {
    setenv(name, "2", 1);
    const char* found = accl::perf::mpiLauncherVariable();
    unsetenv(name);
    ASSERT_NE(found, nullptr) << name;
    EXPECT_STREQ(found, name);
  }
}

// Host buffers are written once when allocated: a page never written reads as the kernel's
// shared zero page, so -c 0 timings of an untouched input would measure one cached page.
// Resident memory only grows for pages that were written.
long residentKiB() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::strtol(line + 6, nullptr, 10);
  std::fclose(f);
  return kib;
}

TEST(PerfBuffers, HostBuffersAreRealMemoryBeforeTheFirstCall) {
  const long before = residentKiB();
  ASSERT_GT(before, 0);
  accl::perf::RankBuffer buf;
  const size_t bytes = size_t{64} << 20;
  ASSERT_EQ(accl::perf::RankBuffer::allocate(bytes, nullptr, &buf), ncclSuccess);
  EXPECT_GE(residentKiB() - before, static_cast<long>(bytes / 1024) * 9 / 10);
}
