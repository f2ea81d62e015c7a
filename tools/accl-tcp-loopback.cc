// accl-tcp-loopback: raw TCP over loopback between two processes, as the yardstick for the
// socket transport on one machine (NCCL_SHM_DISABLE=1). Same socket options as ACCL's data
// sockets (net::tuneForBulk: ACCL_SOCKET_BUF_BYTES buffers, TCP_NODELAY).
//   accl-tcp-loopback [--iters N] [--batches B] [--sizes 1M,16M,128M] [--reps R] [--tests latency,stream,bidir]
// Prints, per line, best and median over batches (or reps):
//   * ping-pong: one side sends 8 B, the other echoes them; one-way = round trip / 2;
//   * exchange: both sides send 8 B, then both receive 8 B: what a 2-rank 8 B all-reduce
//     must do at least (one one-way latency per operation);
//     "block" waits in recv(), "spin" polls recv(MSG_DONTWAIT) and never sleeps;
//   * stream: one side sends S bytes, the other reads them and answers 1 byte;
//   * bidir: both sides send S bytes and receive S bytes at once, per-direction GB/s = S / time;
//     "1 thread": one poll() loop does both, "2 threads": a sender thread next to the receiver.
//     A 2-rank ring all-reduce of S bytes moves S bytes each way per rank, and its busbw is
//     S / time too (all-gather: busbw = per-rank bytes each way / time), so this is what
//     busbw compares against.
#include <cerrno>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "net/socket.h"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool sendFull(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool recvFull(int fd, char* p, size_t n, bool spin) {
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, spin ? MSG_DONTWAIT : 0);
    if (k < 0 && spin && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Sends `n` bytes and receives `n` bytes at the same time on one non-blocking-style loop.
bool exchangeFull(int fd, const char* out, char* in, size_t n) {
  size_t sent = 0, got = 0;
  while (sent < n || got < n) {
    pollfd p{fd, static_cast<short>((sent < n ? POLLOUT : 0) | (got < n ? POLLIN : 0)), 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) return false;
    if (sent < n && (p.revents & POLLOUT)) {
      ssize_t k = ::send(fd, out + sent, n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k < 0 && errno != EAGAIN) return false;
      if (k > 0) sent += static_cast<size_t>(k);
    }
    if (got < n && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t k = ::recv(fd, in + got, n - got, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN)) return false;
      if (k > 0) got += static_cast<size_t>(k);
    }
  }
  return true;
}

struct Stats {
  double best, median;
};

Stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2]};
}

enum class Test { PingPong, ExchangeBlock, ExchangeSpin, Stream, Bidir, BidirThreads };

// Runs `test` on one end of the connection; `leader` is the process that reports. Returns the
// seconds per operation of each batch (leader only).
std::vector<double> run(int fd, bool leader, Test test, size_t bytes, int iters, int batches) {
  std::vector<char> out(std::max<size_t>(bytes, 8), 'x'), in(out.size());
  std::vector<double> perOp;
  char ack = 'a';
  for (int b = 0; b < batches; b++) {
    auto t0 = Clock::now();
    if (test == Test::BidirThreads) {  // one sender thread per batch, next to the receiving one
      bool sent = true;
      std::thread sender([&] {
        for (int i = 0; i < iters && sent; i++) sent = sendFull(fd, out.data(), bytes);
      });
      bool got = true;
      for (int i = 0; i < iters && got; i++) got = recvFull(fd, in.data(), bytes, false);
      sender.join();
      if (!sent || !got) {
        std::fprintf(stderr, "accl-tcp-loopback: connection failed: %s\n", std::strerror(errno));
        std::exit(1);
      }
    }
    for (int i = 0; i < iters && test != Test::BidirThreads; i++) {
      bool ok = true;
      switch (test) {
        case Test::PingPong:
          ok = leader ? sendFull(fd, out.data(), 8) && recvFull(fd, in.data(), 8, false)
                      : recvFull(fd, in.data(), 8, false) && sendFull(fd, out.data(), 8);
          break;
        case Test::ExchangeBlock:
        case Test::ExchangeSpin:
          ok = sendFull(fd, out.data(), 8) && recvFull(fd, in.data(), 8, test == Test::ExchangeSpin);
          break;
        case Test::Stream:
          ok = leader ? sendFull(fd, out.data(), bytes) && recvFull(fd, &ack, 1, false)
                      : recvFull(fd, in.data(), bytes, false) && sendFull(fd, &ack, 1);
          break;
        case Test::Bidir:
          ok = exchangeFull(fd, out.data(), in.data(), bytes);
          break;
        case Test::BidirThreads:
          break;  // whole batch below
      }
      if (!ok) {
        std::fprintf(stderr, "accl-tcp-loopback: connection failed: %s\n", std::strerror(errno));
        std::exit(1);
      }
    }
    perOp.push_back(since(t0) / iters);
  }
  return perOp;
}

size_t parseSize(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  switch (end && *end ? *end : ' ') {
    case 'K': case 'k': v *= 1 << 10; break;
    case 'M': case 'm': v *= 1 << 20; break;
    case 'G': case 'g': v *= 1 << 30; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

int usage() {
  std::fprintf(stderr,
               "usage: accl-tcp-loopback [--iters N] [--batches B] [--sizes 1M,16M,128M] [--reps R] "
               "[--tests latency,stream,bidir]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 2000, batches = 10, reps = 5;
  std::vector<size_t> sizes = {1 << 20, 16 << 20, 128 << 20};
  std::string tests = "latency,stream,bidir";  // which groups of lines to print
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    std::string v = argv[++i];
    if (a == "--iters") iters = std::max(1, std::atoi(v.c_str()));
    else if (a == "--batches") batches = std::max(1, std::atoi(v.c_str()));
    else if (a == "--reps") reps = std::max(1, std::atoi(v.c_str()));
    else if (a == "--tests") tests = v;
    else if (a == "--sizes") {
      sizes.clear();
      for (size_t at = 0; at <= v.size();) {
        size_t comma = v.find(',', at);
        if (comma == std::string::npos) comma = v.size();
        if (comma > at) sizes.push_back(parseSize(v.substr(at, comma - at)));
        at = comma + 1;
      }
    } else return usage();
  }

  accl::net::SockAddr addr;
  accl::net::Socket listener;
  accl::net::SockAddr bound;
  if (accl::net::parseHostPort("127.0.0.1:1", &addr) != ncclSuccess) return 1;
  addr.setPort(0);  // any free port
  if (accl::net::listenOn(addr, &listener, &bound, 4) != ncclSuccess) return 1;
  std::fflush(stdout);
  pid_t child = fork();
  if (child < 0) return 1;
  const bool leader = child != 0;
  accl::net::Socket conn;
  if (leader) {
    if (accl::net::acceptOne(listener, &conn, 10000) != ncclSuccess) return 1;
  } else {
    listener.close();
    std::string why;
    if (accl::net::connectWithin(bound, &conn, 10000, &why) != ncclSuccess) {
      std::fprintf(stderr, "connect: %s\n", why.c_str());
      return 1;
    }
  }
  accl::net::tuneForBulk(conn);

  auto report = [&](const char* what, Test test, size_t bytes, int n, int b) {
    std::vector<double> perOp = run(conn.fd(), leader, test, bytes, n, b);
    if (!leader) return;
    Stats s = summarize(perOp);
    if (bytes <= 8) {
      double scale = test == Test::PingPong ? 0.5e6 : 1e6;  // ping-pong: one-way = RTT / 2
      std::printf("%-22s %10zu B   best %8.2f us   median %8.2f us\n", what, bytes, s.best * scale, s.median * scale);
    } else {
      std::printf("%-22s %10zu B   best %8.3f GB/s median %8.3f GB/s\n", what, bytes, bytes / s.best / 1e9,
                  bytes / s.median / 1e9);
    }
    std::fflush(stdout);
  };
  auto want = [&](const char* group) { return tests.find(group) != std::string::npos; };
  if (leader) std::printf("# raw TCP over 127.0.0.1, 2 processes, %d x %d iterations per latency line\n", batches, iters);
  if (want("latency")) {
    report("ping-pong one-way", Test::PingPong, 8, iters, batches);
    report("exchange (block)", Test::ExchangeBlock, 8, iters, batches);
    report("exchange (spin)", Test::ExchangeSpin, 8, iters, batches);
  }
  for (size_t s : sizes) {
    int n = std::max(1, static_cast<int>((256u << 20) / s));  // ~256 MiB per rep
    if (want("stream")) report("stream one-way", Test::Stream, s, n, reps);
    if (want("bidir")) {
      report("bidir 1 thread", Test::Bidir, s, n, reps);
      report("bidir 2 threads", Test::BidirThreads, s, n, reps);
    }
  }
  if (leader) {
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  return 0;
}
