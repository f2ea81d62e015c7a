// Rank-order reductions (ACCL_DETERMINISTIC), simulated for 2-8 ranks over small in-memory
// channels: every output element must carry exactly the bits of ((x0 OP x1) OP x2) ... in
// rank order, computed by an independent reference (unit/device_reference.h), for every type,
// op, count (odd, smaller than and not divisible by the rank count), piece size, root and
// in-place or not. Also: the default algorithms do NOT meet that reference (so the test can
// tell), but still give every rank the same bits.
#include <gtest/gtest.h>
#include <cstring>
#include <functional>
#include <sstream>
#include <vector>
#include "coll/algorithms.h"
#include "unit/device_reference.h"
#include "unit/mem_world.h"

namespace accl {
namespace {

using test::loadBits;
using test::referenceOp;
using test::sameResult;
using Factory = std::function<std::unique_ptr<StepSource>(const CollArgs&)>;

constexpr ncclDataType_t kTypes[] = {ncclInt8,   ncclUint8,   ncclInt32,    ncclUint32,     ncclInt64,     ncclUint64,
                                     ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
constexpr dev::RedKind kOps[] = {dev::RedKind::Sum, dev::RedKind::Prod, dev::RedKind::Max, dev::RedKind::Min};

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool isInfBits(ncclDataType_t t, uint64_t b) {
  switch (t) {
    case ncclFloat16: return (b & 0x7fff) == 0x7c00;
    case ncclBfloat16: return (b & 0x7fff) == 0x7f80;
    case ncclFloat32: return (b & 0x7fffffff) == 0x7f800000;
    case ncclFloat64: return (b & 0x7fffffffffffffffull) == 0x7ff0000000000000ull;
    case ncclFloat8e5m2: return (b & 0x7f) == 0x7c;
    default: return false;
  }
}

// Random bit patterns: both signs and the whole exponent range, so almost every sum rounds
// and a different order shows. No NaN or infinity (their payloads are not what is tested).
std::vector<char> randomInput(ncclDataType_t t, size_t elems, uint64_t seed) {
  const size_t es = dev::typeSize(t);
  std::vector<char> v(elems * es);
  for (size_t i = 0; i < elems; i++) {
    uint64_t bits = mix(seed * 1000003 + i);
    for (int k = 1; test::isNanBits(t, bits) || isInfBits(t, bits); k++) bits = mix(bits + k);
    test::storeBits(v.data() + i * es, es, bits);
  }
  return v;
}

enum class Coll { AllReduce, Reduce, ReduceScatter };

struct SimRun {
  Coll coll;
  Factory factory;
  int n;
  size_t count;  // allreduce/reduce: total; reducescatter: per rank
  ncclDataType_t type;
  dev::RedKind op;
  int root;
  bool inPlace;
  size_t piece;
};

std::string describe(const SimRun& r) {
  std::ostringstream o;
  o << "n=" << r.n << " count=" << r.count << " type=" << dev::typeName(r.type) << " op=" << static_cast<int>(r.op)
    << " root=" << r.root << (r.inPlace ? " in-place" : " out-of-place") << " piece=" << r.piece;
  return o.str();
}

// Runs the plan on every rank; returns each rank's output (only the root's for reduce).
std::vector<std::vector<char>> simulate(const SimRun& run, const std::vector<std::vector<char>>& inputs) {
  const size_t es = dev::typeSize(run.type);
  const size_t outElems = run.count;
  World world(run.n, 4 * run.piece);  // the planner keeps channels >= 4 pieces
  std::vector<std::vector<char>> buf(inputs), out(run.n, std::vector<char>(outElems * es, 0x5a));
  std::vector<Lane> lanes(run.n);
  for (int r = 0; r < run.n; r++) {
    CollArgs a;
    a.src = buf[r].data();
    a.dst = out[r].data();
    if (run.inPlace) a.dst = buf[r].data() + (run.coll == Coll::ReduceScatter ? r * run.count * es : 0);
    a.count = run.count;
    a.type = run.type;
    a.op = run.op;
    a.root = run.root;
    a.rank = r;
    a.nranks = run.n;
    a.pieceBytes = run.piece;
    lanes[r].add(run.factory(a));
  }
  EXPECT_TRUE(world.run(lanes)) << "deadlock: " << describe(run);
  if (run.inPlace)
    for (int r = 0; r < run.n; r++)
      std::memcpy(out[r].data(), buf[r].data() + (run.coll == Coll::ReduceScatter ? r * run.count * es : 0),
                  outElems * es);
  return out;
}

// Element i of the rank-order reduction of input offset `at` (elements).
uint64_t rankOrder(const SimRun& run, const std::vector<std::vector<char>>& in, size_t at) {
  const size_t es = dev::typeSize(run.type);
  uint64_t acc = loadBits(in[0].data() + at * es, es);
  for (int p = 1; p < run.n; p++)
    acc = referenceOp(run.type, static_cast<int>(run.op), acc, loadBits(in[p].data() + at * es, es), es);
  return acc;
}

// Number of output elements (over all ranks that have an output) that differ from rank order.
size_t countRankOrderMismatches(const SimRun& run, std::string* first) {
  const size_t es = dev::typeSize(run.type);
  const size_t inElems = run.coll == Coll::ReduceScatter ? run.count * run.n : run.count;
  std::vector<std::vector<char>> in;
  for (int r = 0; r < run.n; r++) in.push_back(randomInput(run.type, inElems, r * 7919 + run.count));
  std::vector<std::vector<char>> out = simulate(run, in);
  size_t bad = 0;
  for (int r = 0; r < run.n; r++) {
    if (run.coll == Coll::Reduce && r != run.root) continue;
    for (size_t i = 0; i < run.count; i++) {
      uint64_t want = rankOrder(run, in, run.coll == Coll::ReduceScatter ? r * run.count + i : i);
      uint64_t got = loadBits(out[r].data() + i * es, es);
      if (sameResult(run.type, want, got)) continue;
      if (bad++ == 0 && first) {
        std::ostringstream o;
        o << describe(run) << ": rank " << r << " element " << i << " got 0x" << std::hex << got << " want 0x" << want;
        *first = o.str();
      }
    }
  }
  return bad;
}

void expectRankOrderEverywhere(Coll coll, const Factory& factory, bool rooted) {
  int cases = 0;
  for (int n : {2, 3, 4, 5, 8}) {
    for (size_t count : {size_t{1}, size_t{3}, size_t{97}, size_t{1001}}) {
      for (ncclDataType_t type : kTypes) {
        for (size_t oi = 0; oi < 4; oi++) {
          const dev::RedKind op = kOps[oi];
          // Every op on the small counts; sum plus one rotating op on the larger ones.
          if (count > 3 && op != dev::RedKind::Sum && oi != (count + n + type) % 4) continue;
          for (bool inPlace : {false, true}) {
            for (size_t piece : {size_t{16}, size_t{80}}) {
              for (int root : rooted ? std::vector<int>{0, n - 1, n / 2} : std::vector<int>{0}) {
                SimRun run{coll, factory, n, count, type, op, root, inPlace, piece};
                std::string first;
                ASSERT_EQ(countRankOrderMismatches(run, &first), 0u) << first;
                cases++;
              }
            }
          }
        }
      }
    }
  }
  ::testing::Test::RecordProperty("cases", cases);
}

TEST(RankOrder, SlicedAllReduceGivesTheRankOrderBitsForEveryTypeCountAndPiece) {
  expectRankOrderEverywhere(Coll::AllReduce, makeRankOrderAllReduce, false);
}
TEST(RankOrder, GatheredAllReduceGivesTheRankOrderBitsForEveryTypeCountAndPiece) {
  expectRankOrderEverywhere(Coll::AllReduce, makeRankOrderGatheredAllReduce, false);
}
TEST(RankOrder, SlicedReduceGivesTheRankOrderBitsAtEveryRoot) {
  expectRankOrderEverywhere(Coll::Reduce, makeRankOrderReduce, true);
}
TEST(RankOrder, GatheredReduceGivesTheRankOrderBitsAtEveryRoot) {
  expectRankOrderEverywhere(Coll::Reduce, makeRankOrderGatheredReduce, true);
}
TEST(RankOrder, ReduceScatterGivesTheRankOrderBitsInEveryBlock) {
  expectRankOrderEverywhere(Coll::ReduceScatter, makeRankOrderReduceScatter, false);
}

// The check above can tell: the ring and butterfly orders differ from rank order for float
// sums of wide-range values on 3 or more ranks.
TEST(RankOrder, DefaultAlgorithmsDifferFromRankOrderSoTheReferenceCanTell) {
  // 1000 floats fit one channel of 4 x 4000 bytes, as the tuner requires for recursive doubling.
  for (const Factory& f : {Factory(makeRingAllReduce), Factory(makeRecursiveDoublingAllReduce)}) {
    SimRun run{Coll::AllReduce, f, 4, 1000, ncclFloat32, dev::RedKind::Sum, 0, false, 4000};
    EXPECT_GT(countRankOrderMismatches(run, nullptr), 0u);
  }
  SimRun rs{Coll::ReduceScatter, makeRingReduceScatter, 4, 1000, ncclFloat32, dev::RedKind::Sum, 0, false, 64};
  EXPECT_GT(countRankOrderMismatches(rs, nullptr), 0u);
}

// Default mode keeps its own promise: whatever order it uses, every rank ends with the same bits.
TEST(RankOrder, DefaultAllReduceStillGivesEveryRankTheSameBits) {
  for (int n : {2, 3, 4, 5, 8}) {
    for (ncclDataType_t type : {ncclFloat16, ncclFloat32, ncclBfloat16, ncclFloat8e4m3, ncclFloat64}) {
      for (size_t count : {size_t{1}, size_t{7}, size_t{1001}}) {
        const size_t es = dev::typeSize(type);
        // Recursive doubling sends whole buffers: the tuner uses it only when they fit a channel.
        const size_t whole = (count * es + 15) / 16 * 16;
        for (auto [f, piece] : {std::pair<Factory, size_t>{makeRingAllReduce, 64},
                                std::pair<Factory, size_t>{makeRecursiveDoublingAllReduce, whole}}) {
          SimRun run{Coll::AllReduce, f, n, count, type, dev::RedKind::Sum, 0, false, piece};
          std::vector<std::vector<char>> in;
          for (int r = 0; r < n; r++) in.push_back(randomInput(type, count, r * 31 + count));
          std::vector<std::vector<char>> out = simulate(run, in);
          for (int r = 1; r < n; r++) ASSERT_EQ(out[r], out[0]) << describe(run) << " rank " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace accl
