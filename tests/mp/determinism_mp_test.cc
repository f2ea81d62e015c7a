// Deterministic reductions through the public API: with ACCL_DETERMINISTIC=1 (processes) or
// ncclCommSetDeterministic (threads), all-reduce, reduce and reduce-scatter give exactly the
// bits of the rank-order fold ((x0 op x1) op x2) ... for sum, prod, max, min, avg (rank-order
// sum, then one division by n) and PreMulSum (each input scaled, then the rank-order sum), over
// shared memory and sockets, with NCCL_ALGO=Ring/Tree and several chunk sizes, in place and
// not. The reference is tests/unit/device_reference.h (shares no code with the kernels).
// Default mode is checked too: every rank must still end with the same bits.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>
#include "accl.h"
#include "common/rank_runner.h"
#include "unit/device_reference.h"

using namespace accl_test;
namespace ref = accl::test;

namespace {

enum class Coll { AllReduce, Reduce, ReduceScatter };
enum class Op { Sum, Prod, Max, Min, Avg, PreMulSum };

const char* collName(Coll c) {
  return c == Coll::AllReduce ? "AllReduce" : c == Coll::Reduce ? "Reduce" : "ReduceScatter";
}
const char* opName(Op o) {
  const char* names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return names[static_cast<int>(o)];
}

size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclFloat64: case ncclInt64: case ncclUint64: return 8;
    case ncclFloat32: case ncclInt32: case ncclUint32: return 4;
    case ncclFloat16: case ncclBfloat16: return 2;
    default: return 1;
  }
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool isInf(ncclDataType_t t, uint64_t b) {
  if (const ref::NarrowFormat* f = ref::narrowFormatOf(t))
    return f->hasInfinity && ((b >> f->mantBits) & f->expMask()) == f->expMask() && (b & f->mantMask()) == 0;
  if (t == ncclFloat32) return (b & 0x7fffffff) == 0x7f800000;
  if (t == ncclFloat64) return (b & 0x7fffffffffffffffull) == 0x7ff0000000000000ull;
  return false;
}

// Rank p's element i: random bits (both signs, the whole exponent range), never NaN or inf.
uint64_t inputBits(ncclDataType_t t, uint64_t seed, int p, size_t i) {
  uint64_t b = mix(seed * 0x100000001b3ull + static_cast<uint64_t>(p) * 0x9e3779b9ull + i);
  const size_t es = typeSize(t);
  const uint64_t mask = es == 8 ? ~0ull : (1ull << (8 * es)) - 1;
  for (int k = 1; ref::isNanBits(t, b & mask) || isInf(t, b & mask); k++) b = mix(b + k);
  return b & mask;
}

// PreMulSum scalar of rank p: 0.75 + p/8 (exact in every float type used here), or p%3+1.
uint64_t scalarBits(ncclDataType_t t, int p) {
  const double v = 0.75 + 0.125 * p;
  if (const ref::NarrowFormat* f = ref::narrowFormatOf(t)) return f->encode(v, 0);
  if (t == ncclFloat32) {
    float x = static_cast<float>(v);
    uint32_t b;
    std::memcpy(&b, &x, 4);
    return b;
  }
  if (t == ncclFloat64) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    return b;
  }
  return static_cast<uint64_t>(p % 3 + 1);
}

// The rank-order result for one element, from the inputs of all ranks at `at`.
uint64_t expected(ncclDataType_t t, Op op, int n, uint64_t seed, size_t at) {
  const size_t es = typeSize(t);
  const int base = op == Op::Avg || op == Op::PreMulSum ? 0 : static_cast<int>(op);
  auto term = [&](int p) {
    uint64_t x = inputBits(t, seed, p, at);
    return op == Op::PreMulSum ? ref::referenceOp(t, 1, x, scalarBits(t, p), es) : x;
  };
  uint64_t acc = term(0);
  for (int p = 1; p < n; p++) acc = ref::referenceOp(t, base, acc, term(p), es);
  if (op != Op::Avg) return acc;
  if (t == ncclInt32) return static_cast<uint32_t>(static_cast<int32_t>(acc) / n);
  if (const ref::NarrowFormat* f = ref::narrowFormatOf(t)) {
    const uint32_t nan = t == ncclFloat8e4m3 || t == ncclFloat8e5m2 ? 0x7f : (f->expMask() << f->mantBits) | 1;
    return f->encode(f->decode(static_cast<uint32_t>(acc)) / n, nan);
  }
  if (t == ncclFloat32) {
    float x;
    const uint32_t a32 = static_cast<uint32_t>(acc);
    std::memcpy(&x, &a32, 4);
    x = static_cast<float>(static_cast<double>(x) / n);
    uint32_t b;
    std::memcpy(&b, &x, 4);
    return b;
  }
  double d;
  std::memcpy(&d, &acc, 8);
  d /= n;
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

struct Case {
  Coll coll;
  ncclDataType_t type;
  Op op;
  size_t count;
  bool inPlace;
  int root;
};

// Every op at an odd count (1001); sum also at 1 and 7 (fewer elements than ranks) and, for
// float32 and bfloat16, past one 128 KiB chunk at a count no rank count divides. Five or more
// ranks (slow on small machines) check the three float types whose rounding differs most.
std::vector<Case> cases(int n, bool onlyAllReduce) {
  std::vector<Case> v;
  std::vector<ncclDataType_t> types = {ncclFloat32, ncclBfloat16, ncclFloat8e4m3};
  if (n < 5) types.insert(types.end(), {ncclFloat16, ncclFloat64, ncclInt32});
  int k = 0;
  auto add = [&](Coll coll, ncclDataType_t type, Op op, size_t count) {
    v.push_back({coll, type, op, count, (k % 2) == 1, k % n});
    k++;
  };
  for (Coll coll : {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter}) {
    if (onlyAllReduce && coll != Coll::AllReduce) continue;
    for (ncclDataType_t type : types) {
      for (Op op : {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::PreMulSum}) add(coll, type, op, 1001);
      for (size_t count : {size_t{1}, size_t{7}}) add(coll, type, Op::Sum, count);
      if (type == ncclFloat32 || type == ncclBfloat16) add(coll, type, Op::Sum, 131101);
    }
  }
  return v;
}

std::string describe(const Case& c) {
  std::ostringstream o;
  o << collName(c.coll) << " " << c.count << " x type " << c.type << " " << opName(c.op)
    << (c.inPlace ? " in-place" : " out-of-place") << " root " << c.root;
  return o.str();
}

#define CHECK_NCCL(call, what)                                                                        \
  do {                                                                                                \
    ncclResult_t r_ = (call);                                                                         \
    if (r_ != ncclSuccess) {                                                                          \
      errors.push_back(std::string(what) + ": " #call " = " + ncclGetErrorString(r_));                \
      return errors;                                                                                  \
    }                                                                                                 \
  } while (0)

// Runs every case on this rank and checks its output against the rank-order reference.
std::vector<std::string> checkRankOrder(ncclComm_t comm, int rank, int n, bool onlyAllReduce = false) {
  std::vector<std::string> errors;
  for (const Case& c : cases(n, onlyAllReduce)) {
    const size_t es = typeSize(c.type);
    const size_t inElems = c.coll == Coll::ReduceScatter ? c.count * n : c.count;
    const uint64_t seed = mix(static_cast<uint64_t>(c.coll) * 131 + c.type * 17 + static_cast<int>(c.op) * 5 + c.count);
    std::vector<char> send(inElems * es), recv(c.count * es, 0x5a);
    for (size_t i = 0; i < inElems; i++) {
      uint64_t b = inputBits(c.type, seed, rank, i);
      std::memcpy(send.data() + i * es, &b, es);
    }
    const size_t outOffset = c.coll == Coll::ReduceScatter ? rank * c.count * es : 0;
    void* out = c.inPlace ? send.data() + outOffset : recv.data();
    ncclRedOp_t op = static_cast<ncclRedOp_t>(c.op);
    uint64_t scalar = scalarBits(c.type, rank);
    if (c.op == Op::PreMulSum)
      CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, c.type, ncclScalarHostImmediate, comm), describe(c));
    switch (c.coll) {
      case Coll::AllReduce: CHECK_NCCL(ncclAllReduce(send.data(), out, c.count, c.type, op, comm, nullptr), describe(c)); break;
      case Coll::Reduce:
        CHECK_NCCL(ncclReduce(send.data(), out, c.count, c.type, op, c.root, comm, nullptr), describe(c));
        break;
      case Coll::ReduceScatter:
        CHECK_NCCL(ncclReduceScatter(send.data(), out, c.count, c.type, op, comm, nullptr), describe(c));
        break;
    }
    if (c.op == Op::PreMulSum) CHECK_NCCL(ncclRedOpDestroy(op, comm), describe(c));
    if (c.coll == Coll::Reduce && rank != c.root) continue;
    size_t bad = 0;
    for (size_t i = 0; i < c.count; i++) {
      uint64_t want = expected(c.type, c.op, n, seed, c.coll == Coll::ReduceScatter ? rank * c.count + i : i);
      uint64_t got = 0;
      std::memcpy(&got, static_cast<char*>(out) + i * es, es);
      if (ref::sameResult(c.type, want, got)) continue;
      if (bad++ == 0) {
        std::ostringstream o;
        o << "rank " << rank << ": " << describe(c) << ": element " << i << " got 0x" << std::hex << got << " want 0x"
          << want;
        errors.push_back(o.str());
      }
    }
    if (bad > 1) errors.back() += " (and " + std::to_string(bad - 1) + " more)";
    if (errors.size() > 20) break;
  }
  return errors;
}

// Default mode: whatever its order, every rank must end with the same bits. Each rank hashes
// its all-reduce output; an all-gather of the hashes must show n equal values.
std::vector<std::string> checkSameBitsEverywhere(ncclComm_t comm, int rank, int n) {
  std::vector<std::string> errors;
  for (size_t count : {size_t{1000}, size_t{131101}}) {
    for (ncclDataType_t type : {ncclFloat32, ncclBfloat16, ncclFloat16}) {
      const size_t es = typeSize(type);
      std::vector<char> buf(count * es);
      for (size_t i = 0; i < count; i++) {
        uint64_t b = inputBits(type, count + type, rank, i);
        std::memcpy(buf.data() + i * es, &b, es);
      }
      CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), count, type, ncclSum, comm, nullptr), "default all-reduce");
      uint64_t h = 0;
      for (size_t i = 0; i < buf.size(); i++) h = mix(h ^ static_cast<unsigned char>(buf[i]));
      std::vector<uint64_t> all(n);
      CHECK_NCCL(ncclAllGather(&h, all.data(), 1, ncclUint64, comm, nullptr), "hash all-gather");
      for (int p = 1; p < n; p++)
        if (all[p] != all[0])
          errors.push_back("default mode: rank " + std::to_string(p) + " ended with other bits than rank 0 (" +
                           std::to_string(count) + " elements of type " + std::to_string(type) + ")");
    }
  }
  return errors;
}

std::vector<std::string> rankBody(ncclComm_t comm, int rank, int n, bool setByApi) {
  std::vector<std::string> errors;
  int enabled = -1;
  CHECK_NCCL(ncclCommGetDeterministic(comm, &enabled), "get");
  if (!setByApi && enabled != 1) errors.push_back("ACCL_DETERMINISTIC=1 did not enable the communicator");
  CHECK_NCCL(ncclCommSetDeterministic(comm, 0), "set 0");
  for (std::string& e : checkSameBitsEverywhere(comm, rank, n)) errors.push_back(e);
  CHECK_NCCL(ncclCommSetDeterministic(comm, 1), "set 1");
  for (std::string& e : checkRankOrder(comm, rank, n)) errors.push_back(e);
  return errors;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& m : v) s += m + "\n";
  return s;
}

// ranks, processes (else threads), sockets, NCCL_ALGO, ACCL_CHUNK_SIZE ("" = default)
using Variant = std::tuple<int, bool, bool, std::string, std::string>;
class DeterministicReductions : public testing::TestWithParam<Variant> {};

TEST_P(DeterministicReductions, EveryElementHasTheRankOrderBits) {
  const auto [n, processes, sockets, algo, chunk] = GetParam();
  if (const ChildRole* role = childRole()) {
    if (role->rank >= 0) {
      ncclComm_t comm;
      ASSERT_EQ(initChildRankComm(*role, &comm), ncclSuccess);
      std::vector<std::string> errors = rankBody(comm, role->rank, n, false);
      EXPECT_TRUE(errors.empty()) << join(errors);
      ncclCommDestroy(comm);
    } else {
      std::string error;
      bool ok = runThreadRanks(n, [&](ncclComm_t comm, int rank) {
        std::vector<std::string> errors = rankBody(comm, rank, n, true);
        EXPECT_TRUE(errors.empty()) << join(errors);
      }, &error);
      EXPECT_TRUE(ok) << error;
    }
    return;
  }
  std::vector<std::string> env;
  if (processes) env.push_back("ACCL_DETERMINISTIC=1");  // threads switch it with ncclCommSetDeterministic
  if (sockets) env.push_back("NCCL_SHM_DISABLE=1");
  if (!algo.empty()) env.push_back("NCCL_ALGO=" + algo);
  if (!chunk.empty()) env.push_back("ACCL_CHUNK_SIZE=" + chunk);
  ChildResult result = processes ? runChildProcesses(n, true, 0, env, 300) : runChildProcesses(1, false, n, env, 300);
  EXPECT_TRUE(result.ok) << result.report;
}

std::string variantName(const testing::TestParamInfo<Variant>& info) {
  const auto& [n, processes, sockets, algo, chunk] = info.param;
  return std::to_string(n) + (processes ? "Processes" : "Threads") + (sockets ? "Sockets" : "Shm") +
         (algo.empty() ? "" : algo) + (chunk.empty() ? "" : "Chunk" + chunk);
}

INSTANTIATE_TEST_SUITE_P(, DeterministicReductions,
                         testing::Values(Variant{2, true, false, "", ""}, Variant{3, true, true, "Ring", "4096"},
                                         Variant{4, true, false, "Tree", ""}, Variant{4, true, true, "", "65536"},
                                         Variant{5, true, false, "Ring", "1024"}, Variant{8, true, false, "", ""},
                                         Variant{2, false, false, "Tree", ""}, Variant{4, false, false, "Ring", "8192"},
                                         Variant{6, false, false, "", ""}),
                         variantName);

// NCCL_ALGO=AllPairs folds every all-reduce in rank order without the deterministic mode: the
// same bits as ACCL_DETERMINISTIC=1, on every rank, over sockets (ranks as processes).
using AllPairsVariant = std::tuple<int, bool>;  // ranks, sockets
class AllPairsAllReduce : public testing::TestWithParam<AllPairsVariant> {};

TEST_P(AllPairsAllReduce, EveryElementHasTheRankOrderBitsWithoutTheDeterministicMode) {
  const auto [n, sockets] = GetParam();
  if (const ChildRole* role = childRole()) {
    ncclComm_t comm;
    ASSERT_EQ(initChildRankComm(*role, &comm), ncclSuccess);
    int enabled = -1;
    ASSERT_EQ(ncclCommGetDeterministic(comm, &enabled), ncclSuccess);
    EXPECT_EQ(enabled, 0);
    std::vector<std::string> errors = checkRankOrder(comm, role->rank, n, true);
    EXPECT_TRUE(errors.empty()) << join(errors);
    ncclCommDestroy(comm);
    return;
  }
  std::vector<std::string> env = {"NCCL_ALGO=AllPairs"};
  if (sockets) env.push_back("NCCL_SHM_DISABLE=1");
  ChildResult result = runChildProcesses(n, true, 0, env, 300);
  EXPECT_TRUE(result.ok) << result.report;
}

INSTANTIATE_TEST_SUITE_P(, AllPairsAllReduce,
                         testing::Values(AllPairsVariant{2, true}, AllPairsVariant{4, true}, AllPairsVariant{3, false}),
                         [](const testing::TestParamInfo<AllPairsVariant>& info) {
                           return std::to_string(std::get<0>(info.param)) + "Processes" +
                                  (std::get<1>(info.param) ? "Sockets" : "Shm");
                         });

TEST(DeterministicSwitch, RejectsBadArgumentsAndKeepsTheMode) {
  ncclComm_t comm;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess);
  int enabled = -1;
  ASSERT_EQ(ncclCommSetDeterministic(comm, 1), ncclSuccess);
  EXPECT_EQ(ncclCommSetDeterministic(comm, 2), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("enable = 2 is invalid"), std::string::npos)
      << ncclGetLastError(comm);
  EXPECT_EQ(ncclCommGetDeterministic(comm, &enabled), ncclSuccess);
  EXPECT_EQ(enabled, 1);
  EXPECT_EQ(ncclCommGetDeterministic(comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommSetDeterministic(nullptr, 1), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// With ACCL_CHECK_MISMATCH=2, ranks in different modes fail the call on every rank with a
// message naming the mode, instead of exchanging differently shaped data; once they agree,
// the next call gives the rank-order bits.
TEST(DeterministicSwitch, ModeMismatchIsReportedByTheCallCheck) {
  if (const ChildRole* role = childRole()) {
    ncclComm_t comm;
    ASSERT_EQ(initChildRankComm(*role, &comm), ncclSuccess);
    const int rank = role->rank, n = role->nranks;
    ASSERT_EQ(ncclCommSetDeterministic(comm, rank == 0 ? 1 : 0), ncclSuccess);
    std::vector<float> buf(1000);
    auto fill = [&] {
      for (size_t i = 0; i < buf.size(); i++) {
        uint32_t b = static_cast<uint32_t>(inputBits(ncclFloat32, 99, rank, i));
        std::memcpy(&buf[i], &b, 4);
      }
    };
    fill();
    EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("in rank order (deterministic)"), std::string::npos)
        << ncclGetLastError(comm);
    ASSERT_EQ(ncclCommSetDeterministic(comm, 1), ncclSuccess);
    fill();
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    for (size_t i = 0; i < buf.size(); i++) {
      uint32_t got;
      std::memcpy(&got, &buf[i], 4);
      ASSERT_EQ(got, expected(ncclFloat32, Op::Sum, n, 99, i)) << "element " << i;
    }
    ncclCommDestroy(comm);
    return;
  }
  ChildResult result = runChildProcesses(3, true, 0, {"ACCL_CHECK_MISMATCH=2"}, 120);
  EXPECT_TRUE(result.ok) << result.report;
}

}  // namespace
