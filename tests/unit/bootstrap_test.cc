// Tests for src/bootstrap: rendezvous of N ranks as threads, allGather, barrier, tagged
// send/recv, NCCL_COMM_ID mode, stray connections, nranks mismatch, neighbour death, abort.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include "bootstrap/bootstrap.h"
#include "base/log.h"
#include "net/socket.h"

using namespace accl;
using Clock = std::chrono::steady_clock;
using Ranks = std::vector<std::unique_ptr<Bootstrap>>;

namespace {

int64_t msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// Runs fn(rank) on nranks threads and waits for all.
template <typename Fn>
void onThreads(int nranks, Fn fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// Initialises nranks Bootstraps concurrently from one id; every init must succeed.
Ranks initRanks(const ncclUniqueId& id, int nranks) {
  Ranks ranks(nranks);
  std::vector<ncclResult_t> results(nranks, ncclInternalError);
  onThreads(nranks, [&](int r) { results[r] = Bootstrap::init(id, r, nranks, nullptr, &ranks[r]); });
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(results[r], ncclSuccess) << "rank " << r;
  return ranks;
}

Ranks initRanks(int nranks) {
  ncclUniqueId id;
  EXPECT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  return initRanks(id, nranks);
}

// A loopback port nobody listens on right now.
int freeLoopbackPort() {
  net::SockAddr addr;
  EXPECT_EQ(net::parseHostPort("127.0.0.1:1", &addr), ncclSuccess);
  addr.setPort(0);
  net::Socket listener;
  net::SockAddr bound;
  EXPECT_EQ(net::listenOn(addr, &listener, &bound), ncclSuccess);
  return bound.port();
}

void expectAllGatherWorks(Ranks& ranks) {
  const int n = static_cast<int>(ranks.size());
  std::vector<std::vector<uint64_t>> slots(n, std::vector<uint64_t>(n * 3, 0));
  std::vector<ncclResult_t> results(n);
  onThreads(n, [&](int r) {
    for (int k = 0; k < 3; ++k) slots[r][r * 3 + k] = 1000 * r + k;
    results[r] = ranks[r]->allGather(slots[r].data(), 3 * sizeof(uint64_t));
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(results[r], ncclSuccess);
    for (int s = 0; s < n; ++s) {
      for (int k = 0; k < 3; ++k) EXPECT_EQ(slots[r][s * 3 + k], 1000u * s + k) << "rank " << r << " slot " << s;
    }
  }
}

}  // namespace

class BootstrapRanks : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapRanks, AllGatherFillsEverySlotOnEveryRank) {
  Ranks ranks = initRanks(GetParam());
  for (int r = 0; r < GetParam(); ++r) {
    EXPECT_EQ(ranks[r]->rank(), r);
    EXPECT_EQ(ranks[r]->nranks(), GetParam());
    EXPECT_EQ(ranks[r]->magic(), ranks[0]->magic());
  }
  expectAllGatherWorks(ranks);
  expectAllGatherWorks(ranks);  // the ring stays usable
}

TEST_P(BootstrapRanks, BarrierReturnsOnEveryRank) {
  Ranks ranks = initRanks(GetParam());
  std::vector<int> failures(GetParam(), 0);
  onThreads(GetParam(), [&](int r) {
    for (int i = 0; i < 5; ++i) failures[r] += ranks[r]->barrier() != ncclSuccess;
  });
  for (int f : failures) EXPECT_EQ(f, 0);
}

TEST_P(BootstrapRanks, SendRecvBetweenEveryPairWithTagsReceivedInMixedOrder) {
  const int n = GetParam();
  Ranks ranks = initRanks(n);
  std::vector<int> failures(n, 0);
  onThreads(n, [&](int r) {
    // Send tag 2 before tag 1 to every peer (self included)...
    for (int peer = 0; peer < n; ++peer) {
      for (int tag : {2, 1}) {
        int64_t v = 100000 * r + 100 * peer + tag;
        failures[r] += ranks[r]->send(peer, tag, &v, sizeof(v)) != ncclSuccess;
      }
    }
    // ...and receive tag 1 first, walking the peers backwards.
    for (int peer = n - 1; peer >= 0; --peer) {
      for (int tag : {1, 2}) {
        int64_t v = -1;
        failures[r] += ranks[r]->recv(peer, tag, &v, sizeof(v)) != ncclSuccess;
        failures[r] += v != 100000 * peer + 100 * r + tag;
      }
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(OneTwoFiveEight, BootstrapRanks, ::testing::Values(1, 2, 5, 8));

TEST(Bootstrap, AllGatherOfLargeSlotsDoesNotDeadlock) {
  const int n = 4;
  const size_t bytes = 4 << 20;  // more than the socket buffers hold
  Ranks ranks = initRanks(n);
  std::vector<std::vector<char>> data(n, std::vector<char>(n * bytes));
  std::vector<ncclResult_t> results(n);
  onThreads(n, [&](int r) {
    std::memset(data[r].data() + r * bytes, 'a' + r, bytes);
    results[r] = ranks[r]->allGather(data[r].data(), bytes);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(results[r], ncclSuccess);
    for (int s = 0; s < n; ++s) EXPECT_EQ(data[r][s * bytes + bytes - 1], 'a' + s);
  }
}

TEST(Bootstrap, CommIdModeRendezvousesAtTheFixedAddress) {
  std::string commId = "127.0.0.1:" + std::to_string(freeLoopbackPort());
  setenv("NCCL_COMM_ID", commId.c_str(), 1);
  const int n = 3;
  Ranks ranks(n);
  std::vector<ncclResult_t> results(n, ncclInternalError);
  std::vector<uint64_t> magics(n);
  onThreads(n, [&](int r) {
    ncclUniqueId id;  // every rank computes the id itself
    results[r] = bootstrapGetUniqueId(&id);
    if (results[r] != ncclSuccess) return;
    UniqueIdContents contents = decodeUniqueId(id);
    magics[r] = contents.magic;
    if (contents.root().str() != commId) results[r] = ncclInternalError;
    if (results[r] == ncclSuccess) results[r] = Bootstrap::init(id, r, n, nullptr, &ranks[r]);
  });
  unsetenv("NCCL_COMM_ID");
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(results[r], ncclSuccess) << "rank " << r;
    EXPECT_EQ(magics[r], kCommIdMagic);
  }
  expectAllGatherWorks(ranks);
}

TEST(Bootstrap, BadNcclCommIdIsInvalidArgument) {
  setenv("NCCL_COMM_ID", "not-an-address", 1);
  ncclUniqueId id;
  ncclResult_t res = bootstrapGetUniqueId(&id);
  unsetenv("NCCL_COMM_ID");
  EXPECT_EQ(res, ncclInvalidArgument);
}

TEST(Bootstrap, StrayConnectionsToTheRootDoNotBreakInit) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  net::SockAddr root = decodeUniqueId(id).root();
  net::Socket garbage, wrongMagic, silent, halfHello;
  ASSERT_EQ(net::connectTo(root, &garbage), ncclSuccess);
  ASSERT_EQ(net::connectTo(root, &wrongMagic), ncclSuccess);
  ASSERT_EQ(net::connectTo(root, &silent), ncclSuccess);
  ASSERT_EQ(net::connectTo(root, &halfHello), ncclSuccess);
  const char http[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(net::sendAll(garbage, http, sizeof(http), "root"), ncclSuccess);
  std::vector<char> fakeHello(512, 0x5a);
  ASSERT_EQ(net::sendAll(wrongMagic, fakeHello.data(), fakeHello.size(), "root"), ncclSuccess);
  uint64_t magic = decodeUniqueId(id).magic;
  ASSERT_EQ(net::sendAll(halfHello, &magic, sizeof(magic), "root"), ncclSuccess);  // then nothing

  auto start = Clock::now();
  Ranks ranks = initRanks(id, 3);
  EXPECT_LT(msSince(start), 3000);  // the silent connections did not hold anyone up
  expectAllGatherWorks(ranks);
}

TEST(Bootstrap, StrayConnectionToARankListenerIsDroppedAndSendRecvStillWorks) {
  Ranks ranks = initRanks(2);
  // Rank 0's ring successor socket leads to rank 1's listener.
  net::SockAddr listener1;
  listener1.len = sizeof(listener1.ss);
  std::vector<int> fds = ranks[0]->neighbourFds();
  ASSERT_EQ(fds.size(), 2u);
  ASSERT_EQ(getpeername(fds[1], reinterpret_cast<sockaddr*>(&listener1.ss), &listener1.len), 0);
  net::Socket stray, silent;
  ASSERT_EQ(net::connectTo(listener1, &stray), ncclSuccess);
  ASSERT_EQ(net::connectTo(listener1, &silent), ncclSuccess);
  std::vector<char> junk(64, 0x11);
  ASSERT_EQ(net::sendAll(stray, junk.data(), junk.size(), "rank 1"), ncclSuccess);

  int sent = 1234, got = 0;
  ASSERT_EQ(ranks[0]->send(1, 9, &sent, sizeof(sent)), ncclSuccess);
  auto start = Clock::now();
  EXPECT_EQ(ranks[1]->recv(0, 9, &got, sizeof(got)), ncclSuccess);
  EXPECT_LT(msSince(start), 1000);
  EXPECT_EQ(got, 1234);
}

TEST(Bootstrap, NranksMismatchFailsEveryRankWithAClearError) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  std::vector<std::unique_ptr<Bootstrap>> ranks(2);
  std::vector<ncclResult_t> results(2);
  auto start = Clock::now();
  onThreads(2, [&](int r) { results[r] = Bootstrap::init(id, r, r == 0 ? 2 : 3, nullptr, &ranks[r]); });
  EXPECT_EQ(results[0], ncclInvalidUsage);
  EXPECT_EQ(results[1], ncclInvalidUsage);
  EXPECT_NE(std::strstr(lastErrorText(), "nranks mismatch"), nullptr) << lastErrorText();
  EXPECT_LT(msSince(start), 3000);
}

TEST(Bootstrap, DuplicateRankFailsWithAClearError) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  std::vector<std::unique_ptr<Bootstrap>> ranks(2);
  std::vector<ncclResult_t> results(2);
  onThreads(2, [&](int r) { results[r] = Bootstrap::init(id, 0, 2, nullptr, &ranks[r]); });
  EXPECT_EQ(results[0], ncclInvalidUsage);
  EXPECT_EQ(results[1], ncclInvalidUsage);
  EXPECT_NE(std::strstr(lastErrorText(), "joined twice"), nullptr) << lastErrorText();
}

TEST(Bootstrap, InvalidRankIsRejectedBeforeAnyNetworking) {
  ncclUniqueId id{};
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::init(id, 3, 2, nullptr, &b), ncclInvalidArgument);
  EXPECT_EQ(Bootstrap::init(id, 0, 1, nullptr, &b), ncclInvalidArgument);  // all-zero id
}

// A neighbour that vanished without saying goodbye (abort, or a killed process) is reported.
TEST(Bootstrap, ClosedNeighbourDetectsANeighbourThatAbortedWithoutGoodbye) {
  Ranks ranks = initRanks(3);
  EXPECT_EQ(ranks[0]->closedNeighbour(), -1);
  EXPECT_EQ(ranks[0]->neighbourFds().size(), 2u);
  ranks[1]->abort();
  ranks[1].reset();
  int seenBy0 = -1, seenBy2 = -1, culprit0 = -7, culprit2 = -7;
  for (int i = 0; i < 100 && (seenBy0 < 0 || seenBy2 < 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    seenBy0 = ranks[0]->closedNeighbour(&culprit0);
    seenBy2 = ranks[2]->closedNeighbour(&culprit2);
  }
  EXPECT_EQ(seenBy0, 1);  // rank 0's next
  EXPECT_EQ(seenBy2, 1);  // rank 2's prev
  EXPECT_EQ(culprit0, 1);
  EXPECT_EQ(culprit2, 1);
}

// An orderly destroy leaves a goodbye, so a neighbour still waiting on others does not fail.
TEST(Bootstrap, ClosedNeighbourIgnoresANeighbourThatLeftInOrder) {
  Ranks ranks = initRanks(3);
  ranks[1].reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ranks[0]->closedNeighbour(), -1);
  EXPECT_EQ(ranks[2]->closedNeighbour(), -1);
}

// A rank that fails names the rank it lost in the notice it leaves on the ring.
TEST(Bootstrap, ClosedNeighbourReportsTheCulpritNamedInAFailureNotice) {
  Ranks ranks = initRanks(4);
  ranks[1]->closeRing(3);
  int culprit = -7, seen = -1;
  for (int i = 0; i < 100 && seen < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    seen = ranks[2]->closedNeighbour(&culprit);
  }
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(culprit, 3);
}

TEST(Bootstrap, AllGatherWithADeadNeighbourIsARemoteError) {
  Ranks ranks = initRanks(2);
  ranks[1].reset();
  std::vector<int> slots(2, 0);
  EXPECT_EQ(ranks[0]->allGather(slots.data(), sizeof(int)), ncclRemoteError);
}

TEST(Bootstrap, AbortInterruptsABlockedRecvPromptly) {
  Ranks ranks = initRanks(2);
  Clock::time_point abortedAt;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abortedAt = Clock::now();
    ranks[0]->abort();
  });
  int v;
  EXPECT_EQ(ranks[0]->recv(1, 7, &v, sizeof(v)), ncclInternalError);
  aborter.join();
  EXPECT_LT(msSince(abortedAt), 200);
  // Rank 1 sees its neighbour go away.
  int seen = -1;
  for (int i = 0; i < 100 && seen < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    seen = ranks[1]->closedNeighbour();
  }
  EXPECT_EQ(seen, 0);
}

TEST(Bootstrap, AbortFlagInterruptsAWaitingInit) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  std::atomic<int> abortFlag{0};
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abortFlag = 1;
  });
  std::unique_ptr<Bootstrap> b;
  auto start = Clock::now();
  EXPECT_EQ(Bootstrap::init(id, 0, 2, &abortFlag, &b), ncclInternalError);  // rank 1 never comes
  raiser.join();
  EXPECT_LT(msSince(start), 400);
}

TEST(Bootstrap, RecvTooSmallForTheMessageIsAnError) {
  Ranks ranks = initRanks(2);
  int64_t big[4] = {1, 2, 3, 4};
  int64_t small = 0;
  ASSERT_EQ(ranks[0]->send(1, 3, big, sizeof(big)), ncclSuccess);
  EXPECT_EQ(ranks[1]->recv(0, 3, &small, sizeof(small)), ncclInvalidUsage);
}

// A rank whose id belongs to another communicator than the root it reached (here: colour 0's
// magic and label with colour 1's root address) is refused with a message naming both.
TEST(Bootstrap, ARankThatReachesAnotherCommunicatorsRootIsToldBoth) {
  ncclUniqueId colour0, colour1;
  ASSERT_EQ(bootstrapNewUniqueId(&colour0, "split colour 0 of comm 1234"), ncclSuccess);
  ASSERT_EQ(bootstrapNewUniqueId(&colour1, "split colour 1 of comm 1234"), ncclSuccess);
  UniqueIdContents wrong = decodeUniqueId(colour0);
  wrong.setRoot(decodeUniqueId(colour1).root());
  std::unique_ptr<Bootstrap> b;
  auto start = Clock::now();
  EXPECT_EQ(Bootstrap::init(encodeUniqueId(wrong), 0, 1, nullptr, &b), ncclInvalidUsage);
  EXPECT_LT(msSince(start), 3000);
  std::string text = lastErrorText();
  EXPECT_NE(text.find("wrong rendezvous"), std::string::npos) << text;
  EXPECT_NE(text.find("'split colour 0 of comm 1234'"), std::string::npos) << text;
  EXPECT_NE(text.find("'split colour 1 of comm 1234'"), std::string::npos) << text;
  // Both roots still serve their own ranks.
  initRanks(colour0, 1);
  initRanks(colour1, 1);
}

// Ids made inside a job never reuse the NCCL_COMM_ID root: each has its own root and magic.
TEST(Bootstrap, IdsMadeInsideAJobIgnoreNcclCommId) {
  setenv("NCCL_COMM_ID", ("127.0.0.1:" + std::to_string(freeLoopbackPort())).c_str(), 1);
  ncclUniqueId a, b;
  ASSERT_EQ(bootstrapNewUniqueId(&a, "a"), ncclSuccess);
  ASSERT_EQ(bootstrapNewUniqueId(&b, "b"), ncclSuccess);
  unsetenv("NCCL_COMM_ID");
  EXPECT_NE(decodeUniqueId(a).magic, kCommIdMagic);
  EXPECT_NE(decodeUniqueId(a).magic, decodeUniqueId(b).magic);
  EXPECT_NE(decodeUniqueId(a).root().str(), decodeUniqueId(b).root().str());
  initRanks(a, 2);
  initRanks(b, 2);
}

// An id from ncclGetUniqueId serves one communicator; reusing it fails at once with a hint.
TEST(Bootstrap, ReusingAUniqueIdFailsFastWithAHint) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  { Ranks first = initRanks(id, 2); }
  std::unique_ptr<Bootstrap> b;
  auto start = Clock::now();
  ncclResult_t res = ncclSuccess;
  for (int attempt = 0; attempt < 50 && res != ncclInvalidUsage; attempt++) {
    // The root closes its listener right after the first rendezvous; give it that moment.
    res = Bootstrap::init(id, 0, 2, nullptr, &b);
  }
  EXPECT_EQ(res, ncclInvalidUsage);
  EXPECT_LT(msSince(start), 5000);
  EXPECT_NE(std::string(lastErrorText()).find("serves exactly one communicator"), std::string::npos)
      << lastErrorText();
}

// A process that knows the job's magic (NCCL_COMM_ID's is a constant) connects to a rank's
// listener claiming to be rank 0's point-to-point link and announces 2^29 bytes. It cannot
// sign the handshake, so it is dropped: the genuine message arrives, nobody waits for or
// allocates the forged size, and no rank is blamed.
TEST(Bootstrap, AForgedHandshakeWithTheRightMagicIsDroppedAndBlamesNobody) {
  // The drop is logged as a WARN, but it is not the last error (issue 27): it is read from the
  // log. (ctest runs each test in a process of its own.)
  const std::string logPath = testing::TempDir() + "accl_forged_" + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", logPath.c_str(), 1);
  resetLogInit();
  auto logText = [&logPath] {
    std::string text;
    if (FILE* f = fopen(logPath.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
      fclose(f);
    }
    return text;
  };
  Ranks ranks = initRanks(3);
  net::SockAddr listener1;
  listener1.len = sizeof(listener1.ss);
  std::vector<int> fds = ranks[0]->neighbourFds();
  ASSERT_EQ(getpeername(fds[1], reinterpret_cast<sockaddr*>(&listener1.ss), &listener1.len), 0);
  struct {
    uint64_t magic;
    int32_t rank, purpose, to, reserved;
    uint8_t nonce[16], mac[32];
    int32_t tag;
    uint32_t pad;
    uint64_t size;
  } forged{ranks[0]->magic(), 0, 2, 1, 0, {}, {}, 77, 0, uint64_t(1) << 29};
  net::Socket forger;
  ASSERT_EQ(net::connectTo(listener1, &forger), ncclSuccess);
  ASSERT_EQ(net::sendAll(forger, &forged, sizeof(forged), "rank 1"), ncclSuccess);
  // Rank 1 waits for rank 0's message while only the forgery has arrived: it must drop it.
  int sent = 4321, got = 0;
  ncclResult_t recvResult = ncclInternalError;
  std::thread receiver([&] { recvResult = ranks[1]->recv(0, 77, &got, sizeof(got)); });
  auto start = Clock::now();
  while (logText().find("handshake failed authentication") == std::string::npos && msSince(start) < 3000) {
    usleep(10 * 1000);
  }
  EXPECT_NE(logText().find("handshake failed authentication"), std::string::npos) << logText();
  EXPECT_EQ(std::string(lastErrorText()).find("handshake failed authentication"), std::string::npos)
      << lastErrorText();
  ASSERT_EQ(ranks[0]->send(1, 77, &sent, sizeof(sent)), ncclSuccess);
  receiver.join();
  EXPECT_EQ(recvResult, ncclSuccess);
  EXPECT_LT(msSince(start), 3000);
  EXPECT_EQ(got, 4321);
  expectAllGatherWorks(ranks);
  unlink(logPath.c_str());
  unsetenv("NCCL_DEBUG_FILE");
  resetLogInit();
}

// ACCL_JOB_SECRET: a rank with another secret is refused by the root with a message saying so,
// and the secret never travels (the root's log and the refusal do not contain it).
TEST(Bootstrap, ARankWithAnotherJobSecretIsRefusedByTheRoot) {
  setenv("ACCL_JOB_SECRET", "correct horse", 1);
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);  // its root knows "correct horse"
  setenv("ACCL_JOB_SECRET", "battery staple", 1);
  std::unique_ptr<Bootstrap> b;
  auto start = Clock::now();
  ncclResult_t res = Bootstrap::init(id, 0, 1, nullptr, &b);
  std::string text = lastErrorText();
  setenv("ACCL_JOB_SECRET", "correct horse", 1);
  EXPECT_EQ(res, ncclInvalidUsage);
  EXPECT_LT(msSince(start), 3000);
  EXPECT_NE(text.find("ACCL_JOB_SECRET differs"), std::string::npos) << text;
  EXPECT_EQ(text.find("horse"), std::string::npos) << text;
  EXPECT_EQ(text.find("battery"), std::string::npos) << text;
  // The refused rank did not spoil the rendezvous: with the right secret it joins.
  initRanks(id, 1);
  unsetenv("ACCL_JOB_SECRET");
}
