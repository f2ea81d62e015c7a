// The transport contract, run the same way on every transport of the list (shm, net): two
// ranks (threads) publish, exchange peer info, choose, set up and connect; then a byte stream
// larger than the ring goes through in odd-sized pieces in both directions at once and
// arrives intact and in order, positions agree, and close() makes the other end fail.
#include <algorithm>
#include <gtest/gtest.h>
#include <sys/random.h>
#include <unistd.h>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include "bootstrap/bootstrap.h"
#include "net/socket_connect.h"
#include "transports/socket/socket_transport.h"
#include "transports/doorbell.h"
#include "transports/net/net_transport.h"
#include "transports/shm/shm_transport.h"

using namespace accl;

namespace {

constexpr size_t kRing = 64 << 10;
constexpr size_t kStream = 5 * kRing + 12345;

std::unique_ptr<Transport> makeTransport(const std::string& kind) {
  if (kind == "shm") return std::make_unique<ShmTransport>();
  return std::make_unique<NetTransport>();
}

unsigned char pattern(int from, size_t i) { return static_cast<unsigned char>(i * 131 + from * 7 + (i >> 11)); }

struct Rank {
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<Transport> transport;
  std::vector<PeerInfo> peers = std::vector<PeerInfo>(2);
  std::vector<std::unique_ptr<PeerConnection>> conns = std::vector<std::unique_ptr<PeerConnection>>(2);
  std::atomic<int> abortFlag{0};
  Doorbell ownBell;
  topo::NetIf loopback;
  TransportSetup ctx;
  PeerConnection* conn = nullptr;
  std::string error;
};

void fail(Rank& r, const std::string& what) {
  if (r.error.empty()) r.error = what;
}

// `beforeConnect` runs after setup, before this rank makes its connection.
void connectRank(Rank& r, int rank, const ncclUniqueId& id, const std::string& kind,
                 const std::function<void()>& beforeConnect = nullptr) {
  if (Bootstrap::init(id, rank, 2, nullptr, &r.bootstrap) != ncclSuccess) return fail(r, "bootstrap");
  r.transport = makeTransport(kind);
  net::parseHostPort("127.0.0.1:1", &r.loopback.addr);
  r.loopback.addr.setPort(0);
  r.loopback.name = "lo";
  PeerInfo& me = r.peers[rank];
  me = PeerInfo{};
  me.rank = rank;
  me.pid = getpid();
  me.hostHash = topo::hostHash();
  if (getrandom(&me.commNonce, sizeof(me.commNonce), 0) != sizeof(me.commNonce)) me.commNonce = 42 + rank;
  std::strcpy(me.hostname, "contract");
  std::strcpy(me.ifname, "lo");
  r.ctx.rank = rank;
  r.ctx.nranks = 2;
  r.ctx.bootstrap = r.bootstrap.get();
  r.ctx.peers = &r.peers;
  r.ctx.abortFlag = &r.abortFlag;
  r.ctx.ringBytes = kRing;
  r.ctx.dataIf = &r.loopback;
  r.ctx.conns = &r.conns;
  if (r.transport->publish(r.ctx, &me) != ncclSuccess) return fail(r, "publish");
  r.ctx.bell = r.transport->sharedBell() ? r.transport->sharedBell() : &r.ownBell;
  if (r.bootstrap->allGather(r.peers.data(), sizeof(PeerInfo)) != ncclSuccess) return fail(r, "allGather");
  r.ctx.nonce = r.peers[0].commNonce;
  const int peer = 1 - rank;
  if (!r.transport->canConnect(r.peers[rank], r.peers[peer])) return fail(r, "canConnect said no");
  if (r.transport->setup(r.ctx, {peer}) != ncclSuccess) return fail(r, "setup");
  if (beforeConnect) beforeConnect();
  if (!r.conns[peer] && r.transport->connect(r.ctx, peer, &r.conns[peer]) != ncclSuccess) return fail(r, "connect");
  r.conn = r.conns[peer].get();
}

// Sends kStream bytes and receives kStream bytes, interleaved, in pieces of odd sizes.
void exchange(Rank& r, int rank) {
  const int peer = 1 - rank;
  SendChannel* out = r.conn->send();
  RecvChannel* in = r.conn->recv();
  size_t sent = 0, got = 0;
  size_t piece = 1000 + 777 * rank;
  while (sent < kStream || got < kStream) {
    if (out->progress() != ncclSuccess || in->progress() != ncclSuccess) return fail(r, "progress failed");
    if (sent < kStream) {
      void* buf;
      size_t avail;
      if (out->acquire(&buf, &avail) != ncclSuccess) return fail(r, "acquire failed");
      size_t n = std::min({avail, kStream - sent, piece});
      for (size_t i = 0; i < n; i++) static_cast<unsigned char*>(buf)[i] = pattern(rank, sent + i);
      if (n) out->commit(n);
      sent += n;
    }
    if (got < kStream) {
      const void* buf;
      size_t avail;
      if (in->peek(&buf, &avail) != ncclSuccess) return fail(r, "peek failed");
      size_t n = std::min({avail, kStream - got, piece + 13});
      for (size_t i = 0; i < n; i++)
        if (static_cast<const unsigned char*>(buf)[i] != pattern(peer, got + i))
          return fail(r, "byte " + std::to_string(got + i) + " differs");
      if (n) in->release(n);
      got += n;
    }
    std::this_thread::yield();
  }
  if (out->position() != kStream || in->position() != kStream) fail(r, "positions disagree with the bytes moved");
}

class TransportContract : public testing::TestWithParam<std::string> {};

TEST_P(TransportContract, StreamLargerThanTheRingArrivesIntactBothWaysAndCloseFailsThePeer) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  Rank ranks[2];
  {
    std::thread t0([&] { connectRank(ranks[0], 0, id, GetParam()); });
    std::thread t1([&] { connectRank(ranks[1], 1, id, GetParam()); });
    t0.join();
    t1.join();
  }
  for (int r = 0; r < 2; r++) ASSERT_TRUE(ranks[r].error.empty()) << "rank " << r << ": " << ranks[r].error;
  EXPECT_STREQ(ranks[0].conn->transportName(), ranks[1].conn->transportName());
  EXPECT_EQ(ranks[0].transport->ringMemory(),
            GetParam() == "shm" ? RingMemory::HostShared : RingMemory::HostPrivate);
  {
    std::thread t0([&] { exchange(ranks[0], 0); });
    std::thread t1([&] { exchange(ranks[1], 1); });
    t0.join();
    t1.join();
  }
  for (int r = 0; r < 2; r++) ASSERT_TRUE(ranks[r].error.empty()) << "rank " << r << ": " << ranks[r].error;

  // Rank 0 closes; rank 1's next receive fails (within a few seconds) instead of waiting forever.
  ranks[0].conn->close(-1);
  ncclResult_t res = ncclSuccess;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (res == ncclSuccess && std::chrono::steady_clock::now() < deadline) {
    const void* buf;
    size_t avail = 0;
    res = ranks[1].conn->recv()->progress();
    if (res == ncclSuccess) res = ranks[1].conn->recv()->peek(&buf, &avail);
    if (res == ncclSuccess && avail == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_NE(res, ncclSuccess) << "a closed connection still looks open to the peer";
  for (auto& r : ranks) r.conns.clear();
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, TransportContract, testing::Values("shm", "net"),
                         [](const testing::TestParamInfo<std::string>& p) { return p.param; });

// Sockets connect on first use, so a data listener accepts while collectives run: handshakes
// with the job's magic but another communicator's nonce, a rank that is not a lower peer, or
// a stripe that does not exist are refused (and logged), and the real peer still connects.
TEST(LazySocketContract, ForgedDataHandshakesAreRefusedAndTheRealPeerStillConnects) {
  const std::string logPath = testing::TempDir() + "accl_forged_" + std::to_string(getpid()) + ".log";
  setenv("NCCL_NET_PLUGIN", "none", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", logPath.c_str(), 1);
  auto log = [&] {
    std::ifstream in(logPath);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  auto refused = [&] {
    std::string text = log();
    int n = 0;
    for (size_t at = text.find("with a wrong handshake"); at != std::string::npos;
         at = text.find("with a wrong handshake", at + 1))
      n++;
    return n;
  };
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  Rank ranks[2];
  std::atomic<int> stage{0};
  std::thread t1([&] { connectRank(ranks[1], 1, id, "net", [&] { stage.store(1); }); });
  std::thread t0([&] {
    connectRank(ranks[0], 0, id, "net", [&] {
      while (stage.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  });
  while (stage.load() < 1 && ranks[1].error.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Rank 1 is set up (its connection to rank 0 waits for sockets): forge three handshakes.
  const Rank& r1 = ranks[1];
  const int nsocks = socketLayout().nsocks();
  const net::DataHandshake forged[] = {
      {r1.bootstrap->magic(), r1.ctx.nonce ^ 1, 0, 0, nsocks, 0, 0},  // another communicator
      {r1.bootstrap->magic(), r1.ctx.nonce, 1, 0, nsocks, 0, 0},      // not a lower peer
      {r1.bootstrap->magic(), r1.ctx.nonce, 0, 99, nsocks, 0, 0},     // no such stripe
  };
  std::vector<net::Socket> forgers(3);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(net::connectTo(r1.peers[1].dataAddr, &forgers[i]), ncclSuccess);
    ASSERT_EQ(net::sendAll(forgers[i], &forged[i], sizeof(forged[i]), "forger", nullptr, 1000), ncclSuccess);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (refused() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(refused(), 3) << log();
  stage.store(2);  // now the real rank 0 connects
  t0.join();
  t1.join();
  for (int r = 0; r < 2; r++) ASSERT_TRUE(ranks[r].error.empty()) << "rank " << r << ": " << ranks[r].error;
  std::thread x0([&] { exchange(ranks[0], 0); });
  std::thread x1([&] { exchange(ranks[1], 1); });
  x0.join();
  x1.join();
  for (int r = 0; r < 2; r++) EXPECT_TRUE(ranks[r].error.empty()) << "rank " << r << ": " << ranks[r].error;
  for (auto& r : ranks) r.conns.clear();
  unlink(logPath.c_str());
}

}  // namespace
