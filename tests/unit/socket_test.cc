// Tests for src/net: address parsing, whole-buffer I/O, EOF/abort/timeout handling, connect retries.
#include <gtest/gtest.h>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include "base/log.h"
#include "net/socket.h"

using namespace accl;
using namespace accl::net;
using Clock = std::chrono::steady_clock;

namespace {

int64_t msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// A connected pair over loopback: `client` (connected) and `server` (accepted).
struct Pair {
  Socket client, server;
};

Pair connectedPair(const char* where = "127.0.0.1:1") {
  SockAddr addr;
  EXPECT_EQ(parseHostPort(where, &addr), ncclSuccess);
  addr.setPort(0);
  Socket listener;
  SockAddr bound;
  EXPECT_EQ(listenOn(addr, &listener, &bound), ncclSuccess);
  Pair p;
  EXPECT_EQ(connectTo(bound, &p.client), ncclSuccess);
  EXPECT_EQ(acceptOne(listener, &p.server, 5000), ncclSuccess);
  return p;
}

// A loopback port with nothing listening on it (just released).
SockAddr freeLoopbackPort() {
  SockAddr addr;
  EXPECT_EQ(parseHostPort("127.0.0.1:1", &addr), ncclSuccess);
  addr.setPort(0);
  Socket listener;
  SockAddr bound;
  EXPECT_EQ(listenOn(addr, &listener, &bound), ncclSuccess);
  return bound;
}

}  // namespace

TEST(ParseHostPort, AcceptsIpv4AndPort) {
  SockAddr a;
  ASSERT_EQ(parseHostPort("127.0.0.1:1234", &a), ncclSuccess);
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.port(), 1234);
  EXPECT_EQ(a.str(), "127.0.0.1:1234");
}

TEST(ParseHostPort, AcceptsBracketedIpv6) {
  SockAddr a;
  ASSERT_EQ(parseHostPort("[::1]:80", &a), ncclSuccess);
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.port(), 80);
  EXPECT_EQ(a.str(), "[::1]:80");
}

TEST(ParseHostPort, AcceptsLinkLocalIpv6WithInterfaceScope) {
  SockAddr a;
  ASSERT_EQ(parseHostPort("[fe80::1%lo]:5000", &a), ncclSuccess);
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.str(), "[fe80::1%lo]:5000");
}

TEST(ParseHostPort, ResolvesHostnames) {
  SockAddr a;
  ASSERT_EQ(parseHostPort("localhost:4321", &a), ncclSuccess);
  EXPECT_EQ(a.port(), 4321);
}

TEST(ParseHostPort, RejectsBadSyntaxWithInvalidArgumentNamingAcceptedFormats) {
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", ":1234", "127.0.0.1:port", "127.0.0.1:70000",
                          "127.0.0.1:0", "::1:80", "[::1:80", "[::1]80", "[::1]:", "[]:80"}) {
    SockAddr a;
    EXPECT_EQ(parseHostPort(bad, &a), ncclInvalidArgument) << bad;
    EXPECT_NE(std::strstr(lastErrorText(), "[<ipv6>]:<port>"), nullptr) << lastErrorText();
  }
  SockAddr a;
  EXPECT_EQ(parseHostPort(nullptr, &a), ncclInvalidArgument);
}

TEST(ParseHostPort, RejectsUnresolvableHost) {
  SockAddr a;
  EXPECT_EQ(parseHostPort("no-such-host.invalid:80", &a), ncclInvalidArgument);
}

TEST(Socket, SendAllAndRecvAllMoveWholeLargeBuffers) {
  Pair p = connectedPair();
  std::vector<char> out(8 << 20), in(8 << 20);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 7);
  std::thread sender([&] { EXPECT_EQ(sendAll(p.client, out.data(), out.size(), "receiver"), ncclSuccess); });
  EXPECT_EQ(recvAll(p.server, in.data(), in.size(), "sender"), ncclSuccess);
  sender.join();
  EXPECT_EQ(in, out);
}

TEST(Socket, WorksOverIpv6Loopback) {
  Pair p = connectedPair("[::1]:1");
  ASSERT_TRUE(p.server.valid());
  int v = 42, got = 0;
  EXPECT_EQ(sendAll(p.client, &v, sizeof(v), "server"), ncclSuccess);
  EXPECT_EQ(recvAll(p.server, &got, sizeof(got), "client"), ncclSuccess);
  EXPECT_EQ(got, 42);
}

TEST(Socket, EofIsRemoteErrorNamingThePeer) {
  Pair p = connectedPair();
  p.client.close();
  char buf[16];
  EXPECT_EQ(recvAll(p.server, buf, sizeof(buf), "rank 7 (test peer)"), ncclRemoteError);
  EXPECT_NE(std::strstr(lastErrorText(), "rank 7 (test peer)"), nullptr) << lastErrorText();
}

TEST(Socket, SendToClosedPeerIsRemoteErrorWithoutSigpipe) {
  Pair p = connectedPair();
  p.server.close();
  std::vector<char> big(1 << 20);
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < 50 && res == ncclSuccess; ++i) res = sendAll(p.client, big.data(), big.size(), "gone peer");
  EXPECT_EQ(res, ncclRemoteError);  // and the process is still alive: no SIGPIPE
}

TEST(Socket, AbortFlagInterruptsBlockedRecvWithin200ms) {
  Pair p = connectedPair();
  std::atomic<int> abortFlag{0};
  Clock::time_point raisedAt;
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    raisedAt = Clock::now();
    abortFlag = 1;
  });
  char buf[4];
  EXPECT_EQ(recvAll(p.server, buf, sizeof(buf), "peer", &abortFlag), ncclInternalError);
  raiser.join();
  EXPECT_LT(msSince(raisedAt), 200);
}

TEST(Socket, TimeoutEndsRecvAsRemoteError) {
  Pair p = connectedPair();
  auto start = Clock::now();
  char buf[4];
  EXPECT_EQ(recvAll(p.server, buf, sizeof(buf), "silent peer", nullptr, 150), ncclRemoteError);
  EXPECT_GE(msSince(start), 140);
  EXPECT_LT(msSince(start), 1000);
}

TEST(Socket, ShutdownWakesABlockedRecv) {
  Pair p = connectedPair();
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    p.server.shutdownBoth();
  });
  char buf[4];
  EXPECT_NE(recvAll(p.server, buf, sizeof(buf), "peer"), ncclSuccess);
  closer.join();
}

TEST(Socket, SendRecvAllExchangesLargeBuffersBothWaysWithoutDeadlock) {
  Pair p = connectedPair();
  const size_t n = 16 << 20;  // far above socket buffers: plain send-then-recv would deadlock
  std::vector<char> aOut(n, 'a'), bOut(n, 'b'), aIn(n), bIn(n);
  std::thread b([&] {
    EXPECT_EQ(sendRecvAll(p.server, bOut.data(), n, "a", p.server, bIn.data(), n, "a"), ncclSuccess);
  });
  EXPECT_EQ(sendRecvAll(p.client, aOut.data(), n, "b", p.client, aIn.data(), n, "b"), ncclSuccess);
  b.join();
  EXPECT_EQ(aIn, bOut);
  EXPECT_EQ(bIn, aOut);
}

TEST(Socket, PeerClosedSeesEofButNotPendingData) {
  Pair p = connectedPair();
  EXPECT_FALSE(peerClosed(p.server));
  char byte = 1;
  ASSERT_EQ(sendAll(p.client, &byte, 1, "server"), ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(peerClosed(p.server));
  ASSERT_EQ(recvAll(p.server, &byte, 1, "client"), ncclSuccess);
  p.client.close();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(peerClosed(p.server));
}

TEST(Socket, ConnectRetriesUntilTheListenerAppears) {
  SockAddr addr = freeLoopbackPort();
  Socket listener;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    EXPECT_EQ(listenOn(addr, &listener, nullptr), ncclSuccess);
  });
  Socket client;
  EXPECT_EQ(connectTo(addr, &client), ncclSuccess);  // default: 100 ms, then 200 ms, ...
  late.join();
}

TEST(Socket, AbortFlagStopsConnectRetries) {
  SockAddr addr = freeLoopbackPort();
  std::atomic<int> abortFlag{0};
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    abortFlag = 1;
  });
  auto start = Clock::now();
  Socket client;
  EXPECT_EQ(connectTo(addr, &client, &abortFlag), ncclInternalError);
  raiser.join();
  EXPECT_LT(msSince(start), 400);
}

TEST(Socket, AcceptOneGivesUpAfterItsTimeout) {
  SockAddr addr = freeLoopbackPort();
  addr.setPort(0);
  Socket listener, accepted;
  ASSERT_EQ(listenOn(addr, &listener, nullptr), ncclSuccess);
  auto start = Clock::now();
  EXPECT_NE(acceptOne(listener, &accepted, 100), ncclSuccess);
  EXPECT_LT(msSince(start), 1000);
}

TEST(Socket, MovedSocketOwnsTheDescriptorOnce) {
  Pair p = connectedPair();
  int fd = p.client.fd();
  Socket moved(std::move(p.client));
  EXPECT_EQ(moved.fd(), fd);
  EXPECT_FALSE(p.client.valid());
  Socket assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.fd(), fd);
  EXPECT_FALSE(moved.valid());
}
