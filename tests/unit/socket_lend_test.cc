// Lent spans (SendChannel::lend): large sends go from the user's buffer straight to send(),
// without a copy into the send ring. The stream the peer reads must be byte for byte what a
// copy would have sent, in order, across striped sockets and around ring bytes committed
// before and after a span; a span can only be extended by the bytes right after it; the ring
// accepts nothing while a span is out; a peer that goes away mid-span fails the sender.
#include <algorithm>
#include <cerrno>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>
#include "net/socket.h"
#include "transports/doorbell.h"
#include "transports/socket/socket_transport.h"

using namespace accl;

namespace {

constexpr size_t kRingBytes = 64 << 10;  // 8 KiB chunks over 2 sockets: many chunk boundaries per span

struct Pair {
  Doorbell sendBell, recvBell;
  std::unique_ptr<SocketConnection> sender, receiver;
  std::vector<int> receiverFds;  // the receiving ends, to kill the peer

  explicit Pair(SocketLayout layout) {
    sender = makeSocketConnection(kRingBytes, layout, &sendBell, SocketPeer{0, 1, "h", "a", ""}, topo::CpuMask{});
    receiver = makeSocketConnection(kRingBytes, layout, &recvBell, SocketPeer{1, 0, "h", "a", ""}, topo::CpuMask{});
    std::vector<net::Socket> a, b;
    for (int i = 0; i < layout.nsocks(); i++) {
      int fds[2];
      EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0) << strerror(errno);
      a.emplace_back(fds[0]);
      b.emplace_back(fds[1]);
      receiverFds.push_back(fds[1]);
    }
    sender->attach(std::move(a));
    receiver->attach(std::move(b));
  }
  ~Pair() {
    sender->close(-1);
    receiver->close(-1);
  }
};

// Commits `bytes` through the ring (a copy, as small steps do).
void commitCopy(SendChannel* out, const std::vector<char>& bytes, std::vector<char>* expected) {
  size_t done = 0;
  while (done < bytes.size()) {
    void* buf;
    size_t avail;
    ASSERT_EQ(out->acquire(&buf, &avail), ncclSuccess);
    size_t n = std::min(avail, bytes.size() - done);
    std::memcpy(buf, bytes.data() + done, n);
    out->commit(n);
    done += n;
  }
  expected->insert(expected->end(), bytes.begin(), bytes.end());
}

std::vector<char> pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<char>((i * 131 + seed * 7 + i / 4093) & 0xff);
  return v;
}

// Reads `n` bytes of the receiver's stream.
std::vector<char> readStream(RecvChannel* in, size_t n) {
  std::vector<char> got;
  got.reserve(n);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
    const void* buf;
    size_t avail;
    EXPECT_EQ(in->peek(&buf, &avail), ncclSuccess);
    avail = std::min(avail, n - got.size());
    if (avail == 0) {
      std::this_thread::yield();
      continue;
    }
    got.insert(got.end(), static_cast<const char*>(buf), static_cast<const char*>(buf) + avail);
    in->release(avail);
  }
  return got;
}

void waitHandedOff(SendChannel* out, uint64_t end) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (out->handedOff() < end && std::chrono::steady_clock::now() < deadline) {
    ASSERT_EQ(out->progress(), ncclSuccess);
    std::this_thread::yield();
  }
  ASSERT_GE(out->handedOff(), end) << "the span was not sent within 30 s";
}

void lentSpansArriveInOrder(SocketLayout layout) {
  Pair p(layout);
  SendChannel* out = p.sender->send();
  std::vector<char> expected;
  // A ragged ring prefix, so the span starts mid-chunk.
  commitCopy(out, pattern(1000, 1), &expected);
  // A span much larger than the ring, ragged, in two contiguous parts.
  const std::vector<char> user = pattern((3 << 20) + 13 + 100003, 2);
  const size_t first = (3 << 20) + 13;
  ASSERT_TRUE(out->lend(user.data(), first));
  ASSERT_TRUE(out->lend(user.data() + first, user.size() - first)) << "the bytes right after a span extend it";
  expected.insert(expected.end(), user.begin(), user.end());
  const uint64_t spanEnd = out->position();
  EXPECT_EQ(spanEnd, 1000 + user.size());
  const std::vector<char> other = pattern(70000, 3);
  EXPECT_FALSE(out->lend(other.data(), other.size())) << "bytes elsewhere cannot extend a span still out";
  void* buf;
  size_t avail;
  ASSERT_EQ(out->acquire(&buf, &avail), ncclSuccess);
  EXPECT_EQ(avail, 0u) << "the ring took bytes while a span was still being sent";

  const std::vector<char> tail1 = pattern(777, 4), tail2 = pattern(5, 5);
  std::vector<char> all = expected;
  all.insert(all.end(), tail1.begin(), tail1.end());
  all.insert(all.end(), other.begin(), other.end());
  all.insert(all.end(), tail2.begin(), tail2.end());
  std::thread reader([&] {
    std::vector<char> got = readStream(p.receiver->recv(), all.size());
    ASSERT_EQ(got.size(), all.size());
    for (size_t i = 0; i < all.size(); i++)
      if (got[i] != all[i]) {
        ADD_FAILURE() << "stream byte " << i << " differs (first span " << 1000 << ".." << spanEnd << ")";
        break;
      }
  });
  waitHandedOff(out, spanEnd);
  // After the span: ring bytes again, then a new span from another buffer, then ring bytes.
  std::vector<char> later;
  commitCopy(out, tail1, &later);
  ASSERT_TRUE(out->lend(other.data(), other.size())) << "a new span once the previous one is sent";
  const uint64_t end2 = out->position();
  waitHandedOff(out, end2);
  commitCopy(out, tail2, &later);
  reader.join();
}

TEST(SocketLend, SpansArriveInStreamOrderOnTwoSocketsOfOneThread) {
  SocketLayout layout;
  layout.nthreads = 1;
  layout.nsocksPerThread = 2;
  lentSpansArriveInOrder(layout);
}

TEST(SocketLend, SpansArriveInStreamOrderOnFourSocketsOfTwoThreads) {
  SocketLayout layout;
  layout.nthreads = 2;
  layout.nsocksPerThread = 2;
  lentSpansArriveInOrder(layout);
}

TEST(SocketLend, APeerGoneMidSpanFailsTheSenderInsteadOfHanging) {
  SocketLayout layout;
  layout.nthreads = 1;
  layout.nsocksPerThread = 2;
  Pair p(layout);
  SendChannel* out = p.sender->send();
  const std::vector<char> user = pattern(16 << 20, 6);
  ASSERT_TRUE(out->lend(user.data(), user.size()));
  // Some of it goes out, then the peer's process dies: its sockets close unread.
  (void)readStream(p.receiver->recv(), 100000);
  p.receiver->close(-1);
  for (int fd : p.receiverFds) shutdown(fd, SHUT_RDWR);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  ncclResult_t res = ncclSuccess;
  while (res == ncclSuccess && std::chrono::steady_clock::now() < deadline) {
    res = out->progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(res, ncclRemoteError) << "the sender still waits 20 s after its peer went away";
  EXPECT_LT(out->handedOff(), out->position());
}

}  // namespace
