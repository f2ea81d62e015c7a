// The environment world: process 0 listens at the out-of-band address, the others connect
// (retrying while it starts); an allgather is a gather to process 0 and a send back.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include "world.h"

namespace accl::perf {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kConnectTimeout = std::chrono::seconds(120);

// Owns one socket descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  bool sendAll(const void* data, size_t n) const {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      p += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }
  bool recvAll(void* data, size_t n) const {
    auto* p = static_cast<char*>(data);
    while (n > 0) {
      const ssize_t k = ::recv(fd_, p, n, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      p += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }

 private:
  int fd_ = -1;
};

bool splitAddress(const std::string& address, std::string* host, std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  return !host->empty() && !port->empty();
}

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfo = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfo resolve(const std::string& host, const std::string& port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* out = nullptr;
  if (getaddrinfo(passive ? nullptr : host.c_str(), port.c_str(), &hints, &out) != 0) return nullptr;
  return AddrInfo(out);
}

void noDelay(const Socket& s) {
  const int one = 1;
  setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

class TcpWorld final : public World {
 public:
  TcpWorld(const LaunchEnv& env) : env_(env) {}
  int size() const override { return env_.size; }
  int rank() const override { return env_.rank; }
  int localRank() const override { return env_.localRank; }
  const char* kind() const override { return "env"; }

  bool connect(const std::string& address, std::string* error) {
    std::string host, port;
    if (!splitAddress(address, &host, &port)) {
      *error = "bad out-of-band address '" + address + "'";
      return false;
    }
    return env_.rank == 0 ? acceptPeers(port, error) : connectToRoot(host, port, error);
  }

  std::vector<std::byte> allgather(std::span<const std::byte> mine) override {
    const size_t n = mine.size();
    std::vector<std::byte> all(n * static_cast<size_t>(env_.size));
    if (env_.rank == 0) {
      std::memcpy(all.data(), mine.data(), n);
      for (int r = 1; r < env_.size; ++r)
        if (!peers_[r].recvAll(all.data() + n * r, n)) lost(r);
      for (int r = 1; r < env_.size; ++r)
        if (!peers_[r].sendAll(all.data(), all.size())) lost(r);
    } else {
      if (!root_.sendAll(mine.data(), n) || !root_.recvAll(all.data(), all.size())) lost(0);
    }
    return all;
  }

  [[noreturn]] void abort(int exitCode) override {
    // Closing our sockets makes every peer's next exchange fail, so they stop too.
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(exitCode);
  }

 private:
  [[noreturn]] void lost(int peer) {
    std::fprintf(stderr, "accl-perf: process %d lost its out-of-band connection to process %d\n", env_.rank, peer);
    abort(3);
  }

  bool acceptPeers(const std::string& port, std::string* error) {
    AddrInfo ai = resolve("", port, true);
    if (!ai) {
      *error = "cannot resolve listening port " + port;
      return false;
    }
    Socket listener(::socket(ai->ai_family, ai->ai_socktype, 0));
    const int one = 1;
    setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (!listener.valid() || ::bind(listener.fd(), ai->ai_addr, ai->ai_addrlen) != 0 ||
        ::listen(listener.fd(), env_.size) != 0) {
      *error = "cannot listen on out-of-band port " + port + ": " + std::strerror(errno);
      return false;
    }
    peers_.resize(static_cast<size_t>(env_.size));
    for (int accepted = 1; accepted < env_.size; ++accepted) {
      Socket peer(::accept(listener.fd(), nullptr, nullptr));
      int32_t peerRank = -1;
      if (!peer.valid() || !peer.recvAll(&peerRank, sizeof peerRank) || peerRank <= 0 ||
          peerRank >= env_.size || peers_[peerRank].valid()) {
        *error = "bad out-of-band hello";
        return false;
      }
      noDelay(peer);
      peers_[peerRank] = std::move(peer);
    }
    return true;
  }

  bool connectToRoot(const std::string& host, const std::string& port, std::string* error) {
    const auto deadline = Clock::now() + kConnectTimeout;
    while (Clock::now() < deadline) {
      if (AddrInfo ai = resolve(host, port, false)) {
        Socket s(::socket(ai->ai_family, ai->ai_socktype, 0));
        if (s.valid() && ::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) == 0) {
          const int32_t me = env_.rank;
          if (!s.sendAll(&me, sizeof me)) break;
          noDelay(s);
          root_ = std::move(s);
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *error = "cannot reach out-of-band address " + host + ":" + port;
    return false;
  }

  LaunchEnv env_;
  std::vector<Socket> peers_;  // process 0: one per other process
  Socket root_;                // other processes: the link to process 0
};

}  // namespace

std::unique_ptr<World> makeTcpWorld(const LaunchEnv& env, const std::string& address, std::string* error) {
  auto world = std::make_unique<TcpWorld>(env);
  if (!world->connect(address, error)) return nullptr;
  return world;
}

}  // namespace accl::perf
