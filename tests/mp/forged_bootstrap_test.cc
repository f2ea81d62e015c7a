// Forged bootstrap bytes against a job started with NCCL_COMM_ID (whose magic is a well-known
// constant) and ACCL_JOB_SECRET: once four ranks are up, a forger connects to every port the
// ranks listen on and presents the magic, a claim to be rank 0's point-to-point link and a
// size prefix of 2^29 (in the old 16-byte handshake layout and in the current one). Then the
// ranks shrink to three (bootstrap point-to-point through those listeners) and all-reduce.
// The forged connections must be dropped and logged; the shrink must work at once and no
// rank may be blamed (no "does not fit", no lost peer).
#include <cstdint>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include "../common/free_port.h"
#include "nccl.h"
#include "common/proc_sockets.h"
#include "common/text_file.h"

namespace {

constexpr int kRanks = 4;
constexpr uint64_t kCommIdMagic = 0x41434c434f4d4d49ull;  // what any NCCL_COMM_ID job presents
constexpr int32_t kShrinkTag = 0x5348524b;                // the tag ncclCommShrink's id travels with

// Loopback ports on which `pid` listens (IPv4).
std::vector<int> listeningPorts(pid_t pid) {
  std::vector<int> ports;
  for (const std::string& local : accl_test::listeningAddresses(accl_test::socketInodes(pid), false))
    ports.push_back(static_cast<int>(strtol(local.c_str() + local.rfind(':') + 1, nullptr, 16)));
  return ports;
}

int connectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

struct P2pHeader {
  int32_t tag;
  uint32_t reserved;
  uint64_t size;
};

// The forged bytes: a handshake (magic, "rank 0", point-to-point) then a 2^29-byte message header.
std::vector<char> forgery(bool currentLayout, int to) {
  std::vector<char> bytes(currentLayout ? 72 : 16, 0);
  int32_t fields[3] = {0, 2, to};  // rank 0, purpose point-to-point, receiver
  std::memcpy(bytes.data(), &kCommIdMagic, 8);
  std::memcpy(bytes.data() + 8, fields, currentLayout ? 12 : 8);
  P2pHeader header{kShrinkTag, 0, uint64_t(1) << 29};
  const char* h = reinterpret_cast<const char*>(&header);
  bytes.insert(bytes.end(), h, h + sizeof(header));
  return bytes;
}

std::string runRank(int rank, int readyFd, int goFd) {
  ncclUniqueId id;
  ncclComm_t world = nullptr;
  if (ncclGetUniqueId(&id) != ncclSuccess) return "ncclGetUniqueId failed";
  if (ncclCommInitRank(&world, kRanks, id, rank) != ncclSuccess) return "init failed";
  char c = 'R';
  if (write(readyFd, &c, 1) != 1 || read(goFd, &c, 1) != 1) return "harness pipe failed";
  int exclude = kRanks - 1;
  if (rank != exclude) {
    ncclComm_t shrunk = nullptr;
    auto start = std::chrono::steady_clock::now();
    ncclResult_t r = ncclCommShrink(world, &exclude, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r != ncclSuccess) return std::string("shrink: ") + ncclGetErrorString(r) + ": " + ncclGetLastError(world);
    if (s > 5) return "shrink took " + std::to_string(s) + " s";
    std::vector<float> buf(1024, static_cast<float>(rank + 1));
    r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, shrunk, nullptr);
    if (r != ncclSuccess || buf[0] != 6 || buf.back() != 6) return "all-reduce after shrink is wrong";
    ncclCommDestroy(shrunk);
  }
  ncclCommDestroy(world);
  return "";
}

using accl_test::readFile;

TEST(ForgedBootstrap, ConstantMagicAndAHugeSizePrefixAreDroppedAndShrinkBlamesNobody) {
  int port = accl_test::freeLoopbackPort();
  ASSERT_GT(port, 0);
  const std::string logDir = testing::TempDir();
  const std::string logPattern = logDir + "accl_forged_" + std::to_string(getpid()) + "_%p.log";
  int ready[2], go[2], errs[kRanks][2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kRanks; rank++) {
    ASSERT_EQ(pipe(errs[rank]), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("NCCL_COMM_ID", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
      setenv("ACCL_JOB_SECRET", "the job's own secret", 1);
      setenv("NCCL_DEBUG", "WARN", 1);
      setenv("NCCL_DEBUG_FILE", logPattern.c_str(), 1);
      alarm(60);
      std::string err = runRank(rank, ready[1], go[0]);
      if (!err.empty()) (void)!write(errs[rank][1], err.data(), err.size());
      _exit(err.empty() ? 0 : 1);
    }
    close(errs[rank][1]);
    pids.push_back(pid);
  }
  char c;
  for (int i = 0; i < kRanks; i++) ASSERT_EQ(read(ready[0], &c, 1), 1);
  std::vector<int> forgers;
  int listeners = 0;
  for (int rank = 0; rank < kRanks; rank++) {
    for (int p : listeningPorts(pids[rank])) {
      listeners++;
      for (bool current : {false, true}) {
        std::vector<char> bytes = forgery(current, rank);
        int fd = connectLoopback(p);
        if (fd < 0) continue;
        (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        forgers.push_back(fd);  // kept open: the listener must drop it, not see it vanish
      }
    }
  }
  usleep(100 * 1000);  // the forgeries are first in every backlog
  for (int i = 0; i < kRanks; i++) ASSERT_EQ(write(go[1], "G", 1), 1);
  std::string logs;
  for (int rank = 0; rank < kRanks; rank++) {
    int status = 0;
    waitpid(pids[rank], &status, 0);
    char buf[512] = {0};
    (void)!read(errs[rank][0], buf, sizeof(buf) - 1);
    close(errs[rank][0]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << rank << ": " << (buf[0] ? buf : WIFSIGNALED(status) ? "killed by a signal" : "failed");
    std::string path = logPattern;
    path.replace(path.find("%p"), 2, std::to_string(pids[rank]));
    logs += readFile(path);
    unlink(path.c_str());
  }
  for (int fd : forgers) close(fd);
  EXPECT_GE(listeners, kRanks) << "the forger found too few listeners to be a meaningful test";
  EXPECT_NE(logs.find("dropped connection from"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("does not fit"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("lost peer"), std::string::npos) << logs;
}

}  // namespace
