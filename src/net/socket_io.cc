// socket_io.cc: whole-buffer send/receive over TCP. Each wait is a poll() of at most
// kAbortSliceMs so an abort flag or a timeout ends it; peer EOF/reset becomes ncclRemoteError naming the peer.
#include <poll.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include "base/log.h"
#include "net/socket.h"

namespace accl::net {

namespace {

// One direction of a transfer: what is left to move and to whom.
struct Direction {
  const Socket* sock = nullptr;
  char* ptr = nullptr;
  size_t left = 0;
  const char* peerDesc = "";
  bool active() const { return left > 0; }
};

const char* describe(const char* desc) { return desc && *desc ? desc : "peer"; }

enum class Step { Progress, WouldBlock, Failed };

Step trySend(Direction& d, ncclResult_t* res) {
  ssize_t n = ::send(d.sock->fd(), d.ptr, d.left, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n > 0) {
    d.ptr += n;
    d.left -= static_cast<size_t>(n);
    return Step::Progress;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Step::WouldBlock;
  if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
    WARN("Connection to %s closed while sending: %s", describe(d.peerDesc), strerror(errno));
    *res = ncclRemoteError;
  } else {
    WARN("send to %s failed: %s", describe(d.peerDesc), strerror(errno));
    *res = ncclSystemError;
  }
  return Step::Failed;
}

Step tryRecv(Direction& d, ncclResult_t* res) {
  ssize_t n = ::recv(d.sock->fd(), d.ptr, d.left, MSG_DONTWAIT);
  if (n > 0) {
    d.ptr += n;
    d.left -= static_cast<size_t>(n);
    return Step::Progress;
  }
  if (n == 0) {
    WARN("Connection closed by %s (%zu bytes still expected)", describe(d.peerDesc), d.left);
    *res = ncclRemoteError;
    return Step::Failed;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Step::WouldBlock;
  if (errno == ECONNRESET || errno == ETIMEDOUT || errno == EHOSTUNREACH) {
    WARN("Connection to %s lost while receiving: %s", describe(d.peerDesc), strerror(errno));
    *res = ncclRemoteError;
  } else {
    WARN("recv from %s failed: %s", describe(d.peerDesc), strerror(errno));
    *res = ncclSystemError;
  }
  return Step::Failed;
}

ncclResult_t transfer(Direction out, Direction in, const std::atomic<int>* abortFlag, int timeoutMs) {
  for (const Direction* d : {&out, &in}) {
    if (d->active() && !d->sock->valid()) {
      WARN("I/O with %s on a closed socket", describe(d->peerDesc));
      return ncclSystemError;
    }
  }
  auto start = std::chrono::steady_clock::now();
  while (out.active() || in.active()) {
    if (abortFlag && abortFlag->load(std::memory_order_relaxed)) return ncclInternalError;
    ncclResult_t res = ncclSuccess;
    bool progressed = false;
    if (out.active()) {
      Step s = trySend(out, &res);
      if (s == Step::Failed) return res;
      progressed |= s == Step::Progress;
    }
    if (in.active()) {
      Step s = tryRecv(in, &res);
      if (s == Step::Failed) return res;
      progressed |= s == Step::Progress;
    }
    if (progressed) continue;

    int slice = kAbortSliceMs;
    if (timeoutMs >= 0) {
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
      if (waited >= timeoutMs) {
        WARN("Timed out after %d ms waiting for %s", timeoutMs,
             describe(in.active() ? in.peerDesc : out.peerDesc));
        return ncclRemoteError;
      }
      slice = static_cast<int>(std::min<int64_t>(slice, timeoutMs - waited));
    }
    pollfd fds[2];
    nfds_t nfds = 0;
    if (out.active()) fds[nfds++] = pollfd{out.sock->fd(), POLLOUT, 0};
    if (in.active()) fds[nfds++] = pollfd{in.sock->fd(), POLLIN, 0};
    if (poll(fds, nfds, slice) < 0 && errno != EINTR) {
      WARN("poll failed: %s", strerror(errno));
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t sendAll(const Socket& s, const void* data, size_t size, const char* peerDesc,
                     const std::atomic<int>* abortFlag, int timeoutMs) {
  Direction out{&s, static_cast<char*>(const_cast<void*>(data)), size, peerDesc};
  return transfer(out, Direction{}, abortFlag, timeoutMs);
}

ncclResult_t recvAll(const Socket& s, void* data, size_t size, const char* peerDesc,
                     const std::atomic<int>* abortFlag, int timeoutMs) {
  Direction in{&s, static_cast<char*>(data), size, peerDesc};
  return transfer(Direction{}, in, abortFlag, timeoutMs);
}

ncclResult_t sendRecvAll(const Socket& to, const void* sendData, size_t sendSize, const char* toDesc,
                         const Socket& from, void* recvData, size_t recvSize, const char* fromDesc,
                         const std::atomic<int>* abortFlag, int timeoutMs) {
  Direction out{&to, static_cast<char*>(const_cast<void*>(sendData)), sendSize, toDesc};
  Direction in{&from, static_cast<char*>(recvData), recvSize, fromDesc};
  return transfer(out, in, abortFlag, timeoutMs);
}

bool peerClosed(const Socket& s) {
  if (!s.valid()) return true;
  char byte;
  ssize_t n = ::recv(s.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;
  return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

}  // namespace accl::net
