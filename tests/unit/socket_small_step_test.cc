// A small step over the socket transport is one TCP segment: the lane commits the step's
// alignment pad (commitPadding) and then its data, and the pad must leave with the data, not
// in a send() of its own (on loopback each send() of a small message costs a few us of CPU
// on both ends). Counted with TCP_INFO's segments sent on the sending socket.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // tcp_info with tcpi_segs_out (glibc's is older)
#include <sys/socket.h>
#include <unistd.h>
#include <cstring>
#include <utility>
#include <vector>
#include "net/socket.h"
#include "transports/doorbell.h"
#include "transports/socket/socket_transport.h"

using namespace accl;

namespace {

uint32_t segmentsSent(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len), 0);
  return info.tcpi_segs_out;
}

TEST(SocketSmallStep, PadAndDataOfASmallStepLeaveInOneSegment) {
  net::SockAddr addr;
  ASSERT_EQ(net::parseHostPort("127.0.0.1:1", &addr), ncclSuccess);
  addr.setPort(0);
  net::Socket listener, client, server;
  net::SockAddr bound;
  ASSERT_EQ(net::listenOn(addr, &listener, &bound), ncclSuccess);
  ASSERT_EQ(net::connectTo(bound, &client), ncclSuccess);
  ASSERT_EQ(net::acceptOne(listener, &server, 5000), ncclSuccess);
  net::tuneForBulk(client);
  const int watched = dup(client.fd());  // the same socket, still readable after the connection owns it
  ASSERT_GE(watched, 0);

  Doorbell bell;
  SocketLayout oneSocket;  // 1 thread x 1 socket: every byte on `client`
  auto conn = makeSocketConnection(64 << 10, oneSocket, &bell, SocketPeer{}, topo::CpuMask{});
  std::vector<net::Socket> socks;
  socks.push_back(std::move(client));
  conn->attach(std::move(socks));
  const uint32_t before = segmentsSent(watched);

  constexpr int kSteps = 100;
  SendChannel* out = conn->send();
  for (int i = 0; i < kSteps; i++) {
    void* buf;
    size_t avail;
    ASSERT_EQ(out->acquire(&buf, &avail), ncclSuccess);
    ASSERT_GE(avail, 8u);
    std::memset(buf, 0xee, 8);
    out->commitPadding(8);
    ASSERT_EQ(out->acquire(&buf, &avail), ncclSuccess);
    ASSERT_GE(avail, 8u);
    std::memset(buf, i, 8);
    out->commit(8);
    unsigned char got[16];
    ASSERT_EQ(net::recvAll(server, got, sizeof(got), "sender", nullptr, 5000), ncclSuccess);
    for (int b = 0; b < 8; b++) ASSERT_EQ(got[8 + b], static_cast<unsigned char>(i)) << "step " << i;
  }
  const uint32_t sent = segmentsSent(watched) - before;
  // A few more than kSteps may go out if the helper thread, just started, sends a pad itself.
  EXPECT_LE(sent, kSteps + 5u) << "small steps took " << sent << " segments for " << kSteps << " steps";
  conn->close(-1);
  close(watched);
}

}  // namespace
