// Call stamps (ACCL_CHECK_MISMATCH=1, the default; src/sched/call_stamp.h) across rank
// processes: every kind of mismatched call (count, datatype, reduction, root, operation, a
// call missing on one rank, the second collective of a group, a receive of another size)
// on every host path (the shared-memory board, shared-memory rings, sockets, an external net
// plugin (the TCP test plugin: the stamps ride in the bytes any plugin is handed), the AllPairs
// direct call, deterministic mode) with 2, 3 and 4 ranks. Nothing is set: the defaults must
// catch it. On every rank: no hang, an error from the mismatched call or, at the latest, from
// the next one (or a WARN naming the mismatch where its own calls were not part of it), and
// no call that returns ncclSuccess with a wrong result; at least one rank fails with
// ncclInvalidUsage and logs both calls. Then the communicator is still usable
// (sched/realign.h): of the three matched all-reduces that follow, each either fails on every
// rank or is exact on every rank, at most one fails, and the last is exact everywhere. Then:
// many matched calls of random sizes and kinds, none of which may fail (no false positive).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/text_file.h"
#include "mp/forked_ranks.h"
#include "nccl.h"

namespace {

constexpr int kMaxRanks = 4;
constexpr int kNext = 3;  // matched all-reduces after the mismatched call
constexpr size_t kNextCounts[kNext] = {4, 1 << 16, 1000};

enum class Kind { Count, Datatype, Op, Root, Operation, MissingCall, GroupSecond, SendSize };
enum class Path { Board, ShmRing, Sockets, AllPairs, Deterministic, NetPlugin };

const char* const kKindNames[] = {"Count", "Datatype", "Op", "Root", "Operation", "MissingCall", "GroupSecond",
                                  "SendSize"};
const char* const kPathNames[] = {"Board", "ShmRing", "Sockets", "AllPairs", "Deterministic", "NetPlugin"};

struct Case {
  Kind kind;
  Path path;
  int nranks;
};

struct Shared {
  accl_forked::SharedId uid;
  int mismatched[kMaxRanks];  // the mismatched call's result
  int next[kMaxRanks][kNext];     // the next matched calls' results
  int nextExact[kMaxRanks][kNext];  // 1: that call returned ncclSuccess with the exact result
};

void setPathEnv(Path path) {
  switch (path) {
    case Path::Board: break;  // the default on one host: small all-reduces on the board
    case Path::ShmRing: setenv("NCCL_ALGO", "Ring", 1); break;
    case Path::Sockets:
      setenv("NCCL_SHM_DISABLE", "1", 1);
      setenv("NCCL_ALGO", "Ring", 1);
      break;
    case Path::AllPairs:
      setenv("NCCL_SHM_DISABLE", "1", 1);
      setenv("NCCL_ALGO", "AllPairs", 1);
      break;
    case Path::Deterministic: setenv("ACCL_DETERMINISTIC", "1", 1); break;
    case Path::NetPlugin: {
      // Between processes of one host through the TCP test plugin (NCCL_NET names it, so
      // there is no silent fallback to the internal socket transport).
      const char* build = getenv("ACCL_TEST_BUILD_DIR");
      const std::string plugin = std::string(build ? build : ".") + "/lib/libnccl-net-testtcp-v11.so";
      setenv("NCCL_NET_PLUGIN", plugin.c_str(), 1);
      setenv("NCCL_NET", "TestTCP", 1);
      setenv("NCCL_SHM_DISABLE", "1", 1);
      setenv("NCCL_ALGO", "Ring", 1);
      break;
    }
  }
}

// The odd rank (the last) makes the other call.
ncclResult_t mismatchedCall(Kind kind, int rank, int n, ncclComm_t comm) {
  std::vector<float> buf(4096 * kMaxRanks, 1.0f);
  float* b = buf.data();
  const bool odd = rank == n - 1;
  switch (kind) {
    case Kind::Count: return ncclAllReduce(b, b, odd ? 512 : 256, ncclFloat, ncclSum, comm, nullptr);
    case Kind::Datatype: return ncclAllReduce(b, b, 256, odd ? ncclInt32 : ncclFloat, ncclSum, comm, nullptr);
    case Kind::Op: return ncclAllReduce(b, b, 256, ncclFloat, odd ? ncclMax : ncclSum, comm, nullptr);
    case Kind::Root: return ncclBroadcast(b, b, 256, ncclFloat, odd ? 1 : 0, comm, nullptr);
    case Kind::Operation:
      return odd ? ncclAllGather(b, b + 4096, 256, ncclFloat, comm, nullptr)
                 : ncclAllReduce(b, b, 256, ncclFloat, ncclSum, comm, nullptr);
    case Kind::MissingCall:
      // The odd rank skips the broadcast: its all-reduce meets the others' broadcast.
      if (!odd) {
        ncclResult_t r = ncclBroadcast(b, b, 256, ncclFloat, 0, comm, nullptr);
        if (r != ncclSuccess) return r;
      }
      return ncclAllReduce(b, b, 256, ncclFloat, ncclSum, comm, nullptr);
    case Kind::GroupSecond: {
      ncclGroupStart();
      ncclAllReduce(b, b, 256, ncclFloat, ncclSum, comm, nullptr);
      ncclAllReduce(b + 4096, b + 4096, odd ? 128 : 256, ncclFloat, ncclSum, comm, nullptr);
      return ncclGroupEnd();
    }
    case Kind::SendSize:
      // Rank 0 sends 1000 floats to rank 1, which posts a receive of 500; the others sit out.
      if (rank == 0) return ncclSend(b, 1000, ncclFloat, 1, comm, nullptr);
      if (rank == 1) return ncclRecv(b, 500, ncclFloat, 0, comm, nullptr);
      return ncclSuccess;
  }
  return ncclInternalError;
}

// A matched all-reduce of `count` floats: its result, and whether the output is exact.
ncclResult_t matchedAllReduce(ncclComm_t comm, int rank, int n, size_t count, int* exact) {
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; i++) buf[i] = static_cast<float>((rank + 1) * (i % 5 + 1));
  ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), count, ncclFloat, ncclSum, comm, nullptr);
  *exact = r == ncclSuccess;
  const float ranks = static_cast<float>(n * (n + 1) / 2);
  for (size_t i = 0; i < count && *exact; i++)
    if (buf[i] != ranks * static_cast<float>(i % 5 + 1)) *exact = 0;
  return r;
}

[[noreturn]] void rankMain(Shared* sh, const Case& c, int rank, const std::string& logPath) {
  alarm(getenv("ACCL_TEST_ALARM") ? atoi(getenv("ACCL_TEST_ALARM")) : 60);  // a hang kills the rank (SIGALRM)
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", logPath.c_str(), 1);
  unsetenv("ACCL_CHECK_MISMATCH");
  setPathEnv(c.path);
  ncclResetDebugInit();
  ncclComm_t comm = accl_forked::initForkedRank(&sh->uid, c.nranks, rank);
  sh->mismatched[rank] = mismatchedCall(c.kind, rank, c.nranks, comm);
  for (int k = 0; k < kNext; k++)
    sh->next[rank][k] = matchedAllReduce(comm, rank, c.nranks, kNextCounts[k], &sh->nextExact[rank][k]);
  ncclCommAbort(comm);  // it may have failed: abort, as an application would
  _exit(0);
}

// Both calls as the log names them (sched/call_stamp.cc describeStamp).
std::vector<std::string> expectedCalls(Kind kind) {
  switch (kind) {
    case Kind::Count: return {"AllReduce(256 x float32, sum)", "AllReduce(512 x float32, sum)"};
    case Kind::Datatype: return {"AllReduce(256 x float32, sum)", "AllReduce(256 x int32, sum)"};
    case Kind::Op: return {"AllReduce(256 x float32, sum)", "AllReduce(256 x float32, max)"};
    case Kind::Root: return {"Broadcast(256 x float32, root 0)", "Broadcast(256 x float32, root 1)"};
    case Kind::Operation: return {"AllReduce(256 x float32, sum)", "AllGather(256 x float32)"};
    case Kind::MissingCall: return {"Broadcast(256 x float32, root 0)", "AllReduce(256 x float32, sum)"};
    case Kind::GroupSecond: return {"AllReduce(256 x float32, sum)", "AllReduce(128 x float32, sum)"};
    case Kind::SendSize: return {"a send of 4000 bytes from rank 0", "a send of 2000 bytes from rank 0"};
  }
  return {};
}

class CallStamp : public testing::TestWithParam<Case> {};

TEST_P(CallStamp, FailsOnEveryRankWithoutHangAndNothingIsSilentlyWrong) {
  const Case& c = GetParam();
  auto* sh = accl_forked::mapShared<Shared>();
  ASSERT_NE(sh, nullptr);
  std::string base = testing::TempDir() + "accl_stamp_" + std::to_string(getpid());
  std::vector<pid_t> pids;
  ASSERT_NO_FATAL_FAILURE(accl_forked::forkRanks(
      c.nranks, [&](int r) { rankMain(sh, c, r, base + "." + std::to_string(r) + ".log"); }, &pids));
  for (int r = 0; r < c.nranks; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << r << " status " << status << " (SIGALRM = it hung)";
  }
  std::string logs;
  // Except when no rank received anything of the mismatched call (two ranks that both take
  // themselves for the broadcast's root): its stamps wait on the connections until the next
  // call that reads them, which the 4-float all-reduce on the board is not.
  const bool unread =
      c.kind == Kind::Root && c.nranks == 2 && (c.path == Path::Board || c.path == Path::Deterministic);
  bool named = false, invalidUsage = false;
  const std::vector<std::string> calls = expectedCalls(c.kind);
  for (int r = 0; r < c.nranks; r++) {
    std::string path = base + "." + std::to_string(r) + ".log";
    std::string log = accl_test::readFile(path);
    unlink(path.c_str());
    logs += "--- rank " + std::to_string(r) + " ---\n" + log;
    // A line naming both calls.
    const std::string tag = "mismatched calls: ";
    for (size_t at = log.find(tag); at != std::string::npos; at = log.find(tag, at + 1)) {
      const std::string line = log.substr(at, log.find('\n', at) - at);
      const bool first = line.find(calls[0]) != std::string::npos, second = line.find(calls[1]) != std::string::npos;
      // A root or a missing call may show only in the next call, which meets a stale stamp:
      // then the line names one of the two (and the call numbers tell them apart).
      if ((first && second) || ((c.kind == Kind::Root || c.kind == Kind::MissingCall) && (first || second)))
        named = true;
    }
    // A rank whose own calls were not part of the mismatch (a sender whose message was
    // received whole, a rank outside the send/receive pair, a root that sent its data) carries
    // on, and learns of it from the WARN the realignment logs before its next call returns.
    const bool warned = log.find("mismatched calls: ") != std::string::npos;
    const bool erred = sh->mismatched[r] != ncclSuccess || sh->next[r][0] != ncclSuccess ||
                       (unread && sh->next[r][1] != ncclSuccess);
    EXPECT_TRUE(erred || warned)
        << "rank " << r << " saw no error in the mismatched call nor in the next one, and no WARN about it";
    invalidUsage = invalidUsage || sh->mismatched[r] == ncclInvalidUsage;
    for (int k = 0; k < kNext; k++) {
      invalidUsage = invalidUsage || sh->next[r][k] == ncclInvalidUsage;
      EXPECT_TRUE(sh->next[r][k] != ncclSuccess || sh->nextExact[r][k])
          << "rank " << r << ": matched all-reduce #" << k << " after the mismatch returned ncclSuccess with a "
          << "wrong result";
    }
  }
  // The communicator stays usable: each matched call fails everywhere or is exact everywhere
  // (the ranks agree which call the mismatch costs), at most one fails (the one in which the
  // mismatch showed, when no rank was in the mismatched call any more; the second only when
  // nothing read the mismatched call's bytes before it), and the last is exact everywhere.
  int failedCalls = 0;
  for (int k = 0; k < kNext; k++) {
    int exact = 0, failed = 0;
    for (int r = 0; r < c.nranks; r++) {
      exact += sh->next[r][k] == ncclSuccess && sh->nextExact[r][k];
      failed += sh->next[r][k] != ncclSuccess;
    }
    EXPECT_TRUE(exact == c.nranks || failed == c.nranks)
        << "matched all-reduce #" << k << " after the mismatch: exact on " << exact << " and failed on " << failed
        << " of " << c.nranks << " ranks\n" << logs;
    if (failed == c.nranks) {
      failedCalls++;
      EXPECT_TRUE(k == 0 || (k == 1 && unread)) << "matched all-reduce #" << k << " failed on every rank\n" << logs;
    }
  }
  EXPECT_LE(failedCalls, 1);
  EXPECT_TRUE(invalidUsage) << "no rank failed with ncclInvalidUsage\n" << logs;
  EXPECT_TRUE(named) << "no log line names both " << calls[0] << " and " << calls[1] << "\n" << logs;
  if (getenv("ACCL_TEST_SHOW_LOGS")) printf("%s", logs.c_str());
  munmap(sh, sizeof(Shared));
}

std::vector<Case> allCases() {
  std::vector<Case> v;
  for (int n = 2; n <= 4; n++)
    for (int p = 0; p < 6; p++)
      for (int k = 0; k < 8; k++) {
        const Kind kind = static_cast<Kind>(k);
        const Path path = static_cast<Path>(p);
        // Sends and receives have one path per transport: shared memory, sockets, a net plugin.
        if (kind == Kind::SendSize && path != Path::ShmRing && path != Path::Sockets && path != Path::NetPlugin)
          continue;
        // Through the plugin: 2 and 4 ranks (3 adds nothing the other paths do not cover).
        if (path == Path::NetPlugin && n == 3) continue;
        v.push_back({kind, path, n});
      }
  return v;
}

std::string caseName(const testing::TestParamInfo<Case>& info) {
  return std::string(kKindNames[static_cast<int>(info.param.kind)]) + kPathNames[static_cast<int>(info.param.path)] +
         "Np" + std::to_string(info.param.nranks);
}

INSTANTIATE_TEST_SUITE_P(Mismatch, CallStamp, testing::ValuesIn(allCases()), caseName);

// Matched calls of random kinds and sizes (the same sequence on every rank), each checked
// against the exact result: the stamps never fail a matched call. ACCL_TEST_STAMP_CALLS sets
// how many (default 100000; about 3 s a path on 2 vCPUs).
struct NoFalsePositive : testing::TestWithParam<Path> {};

[[noreturn]] void matchedRankMain(accl_forked::SharedId* uid, int* failures, Path path, int rank, int n, long calls) {
  alarm(900);
  unsetenv("ACCL_CHECK_MISMATCH");
  setPathEnv(path);
  ncclComm_t comm = accl_forked::initForkedRank(uid, n, rank);
  std::mt19937 rng(12345);  // the same sequence on every rank
  std::vector<int> in(1 << 14), out((1 << 14) * n);
  for (long i = 0; i < calls; i++) {
    // Mostly small (the latency paths), now and then up to 64 KiB.
    const size_t count = 1 + (rng() % 8 == 0 ? rng() % (1 << 14) : rng() % 64);
    const int kind = static_cast<int>(rng() % 4);
    const int root = static_cast<int>(rng() % n);
    for (size_t j = 0; j < count; j++) in[j] = static_cast<int>((rank + 1) * (j % 7 + 1) + i % 3);
    ncclResult_t r = ncclSuccess;
    bool ok = true;
    switch (kind) {
      case 0:
        r = ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr);
        for (size_t j = 0; j < count && ok; j++)
          ok = out[j] == static_cast<int>(n * (n + 1) / 2 * (j % 7 + 1) + n * (i % 3));
        break;
      case 1:
        r = ncclAllGather(in.data(), out.data(), count, ncclInt32, comm, nullptr);
        for (int p = 0; p < n && ok; p++)
          for (size_t j = 0; j < count && ok; j++)
            ok = out[p * count + j] == static_cast<int>((p + 1) * (j % 7 + 1) + i % 3);
        break;
      case 2:
        r = ncclBroadcast(in.data(), out.data(), count, ncclInt32, root, comm, nullptr);
        for (size_t j = 0; j < count && ok; j++) ok = out[j] == static_cast<int>((root + 1) * (j % 7 + 1) + i % 3);
        break;
      default:
        r = ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclMax, comm, nullptr);
        for (size_t j = 0; j < count && ok; j++) ok = out[j] == static_cast<int>(n * (j % 7 + 1) + i % 3);
        break;
    }
    if (r != ncclSuccess || !ok) {
      fprintf(stderr, "rank %d: call %ld (kind %d, count %zu) %s\n", rank, i, kind, count,
              r != ncclSuccess ? ncclGetErrorString(r) : "wrong result");
      (*failures)++;
      break;
    }
  }
  ncclCommDestroy(comm);
  _exit(0);
}

TEST_P(NoFalsePositive, MatchedCallsOfRandomSizesAllSucceedExactly) {
  const Path path = GetParam();
  long calls = 100000;
  if (const char* e = getenv("ACCL_TEST_STAMP_CALLS")) calls = atol(e);
  struct Block {
    accl_forked::SharedId uid;
    int failures[2];
  };
  auto* sh = accl_forked::mapShared<Block>();
  ASSERT_NE(sh, nullptr);
  std::vector<pid_t> pids;
  ASSERT_NO_FATAL_FAILURE(accl_forked::forkRanks(
      2, [&](int r) { matchedRankMain(&sh->uid, &sh->failures[r], path, r, 2, calls); }, &pids));
  for (int r = 0; r < 2; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " status " << status;
    EXPECT_EQ(sh->failures[r], 0) << "rank " << r << " (its stderr names the call)";
  }
  munmap(sh, sizeof(Block));
}

INSTANTIATE_TEST_SUITE_P(Paths, NoFalsePositive,
                         testing::Values(Path::Board, Path::ShmRing, Path::Sockets, Path::AllPairs, Path::Deterministic,
                                         Path::NetPlugin),
                         [](const testing::TestParamInfo<Path>& info) {
                           return std::string(kPathNames[static_cast<int>(info.param)]);
                         });

}  // namespace
