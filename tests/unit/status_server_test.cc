// The status server (src/core/status_server.cc) answers hang-summary queries from peers. A
// flood of idle connections must not starve a real query, and strays must not leave WARNs
// that overwrite ncclGetLastError while every call succeeds.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <chrono>
#include <string>
#include <utility>
#include <vector>
#include "comm/comm.h"
#include "base/log.h"
#include "comm/status_server.h"
#include "nccl.h"

using namespace accl;

namespace {

std::vector<net::Socket> idleConnections(const net::SockAddr& addr, int count) {
  std::vector<net::Socket> socks;
  for (int i = 0; i < count; i++) {
    net::Socket s;
    if (net::connectTo(addr, &s) == ncclSuccess) socks.push_back(std::move(s));
  }
  return socks;
}

}  // namespace

TEST(StatusServer, AFloodOfIdleConnectionsDoesNotStarveAQueryNorSetTheLastError) {
  ncclComm_t comms[2];
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  Comm& c0 = *comms[0]->impl;
  const net::SockAddr server = c0.peers[1].statusAddr;
  const std::string lastBefore = lastErrorText();

  std::vector<net::Socket> flood = idleConnections(server, 100);
  ASSERT_EQ(flood.size(), 100u);
  net::Socket junk;
  ASSERT_EQ(net::connectTo(server, &junk), ncclSuccess);
  ASSERT_EQ(net::sendAll(junk, "GET / HTTP/1.0\r\n\r\n", 18, "status server"), ncclSuccess);

  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> lines = gatherStatus(c0, 2000);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("rank 1: 0 of 0 ops done, idle"), std::string::npos) << lines[1];
  EXPECT_LT(ms, 500) << "the query waited behind idle connections";

  usleep(1300 * 1000);  // past the server's deadline for the idle connections
  EXPECT_EQ(std::string(lastErrorText()), lastBefore) << "the status server logged a WARN";
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}
