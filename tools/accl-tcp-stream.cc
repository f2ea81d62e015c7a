// accl-tcp-stream: the raw TCP throughput of a link, as the yardstick for the socket transport.
// One process listens and receives, the other connects and sends for a fixed time; the
// receiver prints the rate. Same socket options ACCL's data sockets get (ACCL_SOCKET_BUF_BYTES).
//   accl-tcp-stream --listen <ip>:<port>               (receiver; exits after one stream)
//   accl-tcp-stream --send <ip>:<port> [--seconds S] [--streams N]
#include <algorithm>
#include <cstdlib>
#include <sys/socket.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include "net/socket.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kBlock = 1 << 20;

int usage() {
  std::fprintf(stderr, "usage: accl-tcp-stream --listen <ip>:<port> [--streams N]\n"
                       "       accl-tcp-stream --send <ip>:<port> [--seconds S] [--streams N]\n");
  return 2;
}

uint64_t drain(accl::net::Socket s) {
  std::vector<char> buf(kBlock);
  uint64_t total = 0;
  for (;;) {
    ssize_t n = ::recv(s.fd(), buf.data(), buf.size(), 0);
    if (n <= 0) return total;
    total += static_cast<uint64_t>(n);
  }
}

int receive(const accl::net::SockAddr& addr, int streams) {
  accl::net::Socket listener;
  accl::net::SockAddr bound;
  if (accl::net::listenOn(addr, &listener, &bound, 16, 5000) != ncclSuccess) return 1;
  std::printf("listening on %s\n", bound.str().c_str());
  std::fflush(stdout);
  std::vector<accl::net::Socket> socks(static_cast<size_t>(streams));
  for (auto& s : socks) {
    if (accl::net::acceptOne(listener, &s, 60000) != ncclSuccess) return 1;
    accl::net::tuneForBulk(s);
  }
  auto start = Clock::now();
  std::vector<uint64_t> got(socks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < socks.size(); i++) threads.emplace_back([&, i] { got[i] = drain(std::move(socks[i])); });
  for (auto& t : threads) t.join();
  double sec = std::chrono::duration<double>(Clock::now() - start).count();
  uint64_t total = 0;
  for (uint64_t g : got) total += g;
  std::printf("raw TCP: %d stream(s), %.3f GB in %.2f s = %.3f GB/s (%.2f Gbit/s)\n", streams, total / 1e9, sec,
              total / 1e9 / sec, total * 8 / 1e9 / sec);
  return 0;
}

int send(const accl::net::SockAddr& addr, double seconds, int streams) {
  std::vector<std::thread> threads;
  int failures = 0;
  for (int i = 0; i < streams; i++) {
    threads.emplace_back([&] {
      accl::net::Socket s;
      std::string why;
      if (accl::net::connectWithin(addr, &s, 10000, &why) != ncclSuccess) {
        std::fprintf(stderr, "connect to %s: %s\n", addr.str().c_str(), why.c_str());
        failures++;
        return;
      }
      accl::net::tuneForBulk(s);
      std::vector<char> buf(kBlock, 'x');
      auto end = Clock::now() + std::chrono::duration<double>(seconds);
      while (Clock::now() < end) {
        if (::send(s.fd(), buf.data(), buf.size(), MSG_NOSIGNAL) <= 0) break;
      }
    });
  }
  for (auto& t : threads) t.join();
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode, where;
  double seconds = 3;
  int streams = 1;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if ((a == "--listen" || a == "--send") && i + 1 < argc) {
      mode = a;
      where = argv[++i];
    } else if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--streams" && i + 1 < argc) {
      streams = std::max(1, std::atoi(argv[++i]));
    } else {
      return usage();
    }
  }
  accl::net::SockAddr addr;
  if (mode.empty() || accl::net::parseHostPort(where.c_str(), &addr) != ncclSuccess) return usage();
  return mode == "--listen" ? receive(addr, streams) : send(addr, seconds, streams);
}
