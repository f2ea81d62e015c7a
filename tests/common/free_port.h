// free_port.h: a loopback TCP port nobody is listening on right now, for NCCL_COMM_ID in
// tests and for accl-run. Header-only so tools can use it too.
//
// The port is free when we return and bound by a child moments later. Asking the kernel for
// one (bind to port 0) returns a port of the ephemeral range, the same range every outgoing
// connection takes its local port from: with tests running in parallel, one of their many
// loopback connections sometimes takes the port in between ("Address already in use", seen
// once in 60 accl-run launches under load). Ports below that range are never handed out
// implicitly, so they are picked at random there, and kept only if they bind.
#pragma once
#include <arpa/inet.h>
#include <cstdint>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cstdio>
#include <random>

namespace accl_test {

// Whether `port` (0: any) binds on loopback now; *bound gets the port that did.
inline bool bindsOnLoopback(int port, int* bound) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(a);
  bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (ok) *bound = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return ok;
}

inline int freeLoopbackPort() {
  int low = 32768;  // Linux's default when the range cannot be read
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int lo = 0, hi = 0;
    if (std::fscanf(f, "%d %d", &lo, &hi) == 2) low = lo;
    std::fclose(f);
  }
  constexpr int kFirst = 10000;  // above the well-known and most registered service ports
  if (low - kFirst >= 1000) {
    std::random_device seed;
    std::mt19937 gen(seed());
    std::uniform_int_distribution<int> pick(kFirst, low - 1);
    for (int attempt = 0; attempt < 64; attempt++) {
      int port = -1;
      if (bindsOnLoopback(pick(gen), &port)) return port;
    }
  }
  int port = -1;
  return bindsOnLoopback(0, &port) ? port : -1;
}

}  // namespace accl_test
