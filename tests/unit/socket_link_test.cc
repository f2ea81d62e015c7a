// SocketLink's end-of-stream check: a receiver that finds no staged bytes fails only when the
// socket that carries the next byte was closed before it delivered that byte. A helper thread
// marks the socket closed inside pumpRecv and publishes the bytes it read just before only
// after pumpRecv returns; in that window the bytes are there, and the stream has not failed.
#include <cerrno>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cstring>
#include <utility>
#include <vector>
#include "transports/doorbell.h"
#include "transports/socket/socket_link.h"

namespace accl {
namespace {

TEST(SocketLink, TheLastBytesBeforeTheSendersCloseAreNotAnEarlyEof) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0) << strerror(errno);
  std::vector<net::Socket> socks;
  socks.emplace_back(fds[0]);
  net::Socket peer(fds[1]);
  Doorbell bell;
  SocketLink link(std::move(socks), 4096, Stripe{1024, 1}, &bell, SocketPeer{1, 0, "host", "addr", "lo"});

  const char data[100] = "the sender's last message";
  ASSERT_EQ(write(peer.fd(), data, sizeof(data)), static_cast<ssize_t>(sizeof(data)));
  peer.close();
  // What a helper thread does: read the bytes, then (next pass) find the end of the stream...
  EXPECT_TRUE(link.pumpRecv(0));
  EXPECT_TRUE(link.pumpRecv(0));
  ASSERT_TRUE(link.eof[0].load());
  // ...and only then publish what it read. The receiver waits at 0, which was delivered.
  EXPECT_EQ(link.in.ring.tail.load(), 0u);
  EXPECT_FALSE(link.blockedOnEof(0)) << "the 100 bytes read before the close count as an early end of stream";
  link.in.publishMin(link.in.ring.tail);
  EXPECT_EQ(link.in.ring.tail.load(), sizeof(data));
  EXPECT_EQ(std::memcmp(link.in.ring.at(0), data, sizeof(data)), 0);
  // A receiver that wants more than the sender sent is blocked for good.
  EXPECT_TRUE(link.blockedOnEof(sizeof(data)));
}

}  // namespace
}  // namespace accl
