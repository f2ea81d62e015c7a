// socket.cc: owned sockets, listen (with bind retry), connect (with NCCL's retry rules) and
// accept, all interruptible by an abort flag.
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include "base/log.h"
#include "base/param.h"
#include "net/socket.h"

namespace accl::net {

namespace {

bool aborted(const std::atomic<int>* abortFlag) {
  return abortFlag != nullptr && abortFlag->load(std::memory_order_relaxed) != 0;
}

// Sleeps ms milliseconds; returns false (early) if the abort flag was raised.
bool sleepUnlessAborted(int64_t ms, const std::atomic<int>* abortFlag) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (aborted(abortFlag)) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(kAbortSliceMs)));
  }
  return !aborted(abortFlag);
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool setBlocking(int fd, bool blocking) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return false;
  flags = blocking ? (flags & ~O_NONBLOCK) : (flags | O_NONBLOCK);
  return fcntl(fd, F_SETFL, flags) == 0;
}

bool isRetryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH;
}

// One connect attempt. Returns 0 on success, else the errno that made it fail; -1 = aborted.
int connectOnce(const SockAddr& addr, Socket* out, const std::atomic<int>* abortFlag) {
  Socket s(socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) return errno;
  if (connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) return errno;
    // Non-blocking connect so an abort can interrupt a connect that would wait for a SYN timeout.
    for (;;) {
      if (aborted(abortFlag)) return -1;
      pollfd p{s.fd(), POLLOUT, 0};
      int n = poll(&p, 1, kAbortSliceMs);
      if (n < 0 && errno != EINTR) return errno;
      if (n > 0) break;
    }
    int err = 0;
    socklen_t errLen = sizeof(err);
    if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &errLen) != 0) return errno;
    if (err != 0) return err;
  }
  if (!setBlocking(s.fd(), true)) return errno;
  setNoDelay(s.fd());
  *out = std::move(s);
  return 0;
}

}  // namespace

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.release();
  }
  return *this;
}

Socket::~Socket() { close(); }

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdownBoth() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

ncclResult_t listenOn(const SockAddr& addr, Socket* out, SockAddr* bound, int backlog, int bindRetryMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(bindRetryMs);
  for (;;) {
    Socket s(socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
      WARN("socket() for %s failed: %s", addr.str().c_str(), strerror(errno));
      return ncclSystemError;
    }
    // Lets a fixed port (NCCL_COMM_ID) be reused while old connections sit in TIME_WAIT.
    int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
      int err = errno;
      if (err == EADDRINUSE && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      WARN("bind to %s failed: %s", addr.str().c_str(), strerror(err));
      return ncclSystemError;
    }
    if (listen(s.fd(), backlog) != 0) {
      WARN("listen on %s failed: %s", addr.str().c_str(), strerror(errno));
      return ncclSystemError;
    }
    SockAddr actual;
    actual.len = sizeof(actual.ss);
    if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&actual.ss), &actual.len) != 0) {
      WARN("getsockname on %s failed: %s", addr.str().c_str(), strerror(errno));
      return ncclSystemError;
    }
    if (bound) *bound = actual;
    *out = std::move(s);
    return ncclSuccess;
  }
}

ncclResult_t connectTo(const SockAddr& addr, Socket* out, const std::atomic<int>* abortFlag) {
  const int64_t maxRetries = param::socketRetryCnt();
  const int64_t sleepMs = param::socketRetrySleepMsec();
  for (int64_t retry = 0;; ++retry) {
    int err = connectOnce(addr, out, abortFlag);
    if (err == 0) return ncclSuccess;
    if (err < 0) return ncclInternalError;  // aborted: the caller knows why, no WARN
    if (!isRetryableConnectError(err) || retry >= maxRetries) {
      WARN("Connect to %s failed: %s%s", addr.str().c_str(), strerror(err),
           retry > 0 ? (" after " + std::to_string(retry) + " retries").c_str() : "");
      return ncclRemoteError;
    }
    if (retry == 0 || (retry + 1) % 10 == 0) {
      INFO(kSubsysNet | kSubsysBootstrap, "Connect to %s: %s, retry %ld of %ld", addr.str().c_str(),
           strerror(err), static_cast<long>(retry + 1), static_cast<long>(maxRetries));
    }
    // NCCL's backoff: the n-th retry waits n times the base sleep.
    if (!sleepUnlessAborted((retry + 1) * sleepMs, abortFlag)) return ncclInternalError;
  }
}

ncclResult_t acceptOne(const Socket& listener, Socket* out, int timeoutMs, const std::atomic<int>* abortFlag) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (aborted(abortFlag)) return ncclInternalError;
    int slice = kAbortSliceMs;
    if (timeoutMs >= 0) {
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
      if (waited >= timeoutMs) {
        WARN("No connection accepted within %d ms", timeoutMs);
        return ncclSystemError;
      }
      slice = static_cast<int>(std::min<int64_t>(slice, timeoutMs - waited));
    }
    pollfd p{listener.fd(), POLLIN, 0};
    int n = poll(&p, 1, slice);
    if (n < 0 && errno != EINTR) {
      WARN("poll on listening socket failed: %s", strerror(errno));
      return ncclSystemError;
    }
    if (n <= 0) continue;
    int fd = accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      if (errno == EINVAL && aborted(abortFlag)) return ncclInternalError;  // shut down by abort
      WARN("accept failed: %s", strerror(errno));
      return ncclSystemError;
    }
    setNoDelay(fd);
    *out = Socket(fd);
    return ncclSuccess;
  }
}

void tuneForBulk(const Socket& s) {
  int64_t want = param::socketBufBytes();
  if (want > 0) {
    int bufBytes = static_cast<int>(std::min<int64_t>(want, 1 << 30));
    setsockopt(s.fd(), SOL_SOCKET, SO_SNDBUF, &bufBytes, sizeof(bufBytes));
    setsockopt(s.fd(), SOL_SOCKET, SO_RCVBUF, &bufBytes, sizeof(bufBytes));
  }
  setNoDelay(s.fd());
}

void failDeadLinkWithin(const Socket& s, int timeoutMs) {
  if (timeoutMs <= 0) return;
  unsigned int userTimeout = static_cast<unsigned int>(timeoutMs);
  setsockopt(s.fd(), IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeout, sizeof(userTimeout));
  int one = 1;
  int idleSec = std::max(1, timeoutMs / 4000);  // probe an idle link a few times per timeout
  int intervalSec = 1;
  int count = std::max(1, timeoutMs / 1000);
  setsockopt(s.fd(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(s.fd(), IPPROTO_TCP, TCP_KEEPIDLE, &idleSec, sizeof(idleSec));
  setsockopt(s.fd(), IPPROTO_TCP, TCP_KEEPINTVL, &intervalSec, sizeof(intervalSec));
  setsockopt(s.fd(), IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

ncclResult_t connectWithin(const SockAddr& addr, Socket* out, int timeoutMs, std::string* why,
                           const std::atomic<int>* abortFlag, bool retryRefused, const SockAddr* local) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      *why = "no answer within " + std::to_string(timeoutMs) + " ms";
      return ncclRemoteError;
    }
    Socket s(socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s.valid()) {
      *why = strerror(errno);
      return ncclSystemError;
    }
    if (local != nullptr && local->len != 0) {
      SockAddr from = *local;
      from.setPort(0);
      if (bind(s.fd(), reinterpret_cast<const sockaddr*>(&from.ss), from.len) != 0) {
        *why = "cannot bind to " + from.str() + ": " + strerror(errno);
        return ncclSystemError;
      }
    }
    int err = 0;
    if (connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {
        err = 0;
        bool ready = false;
        while (!ready) {
          if (aborted(abortFlag)) return ncclInternalError;
          left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
          if (left <= 0) {
            *why = "no answer within " + std::to_string(timeoutMs) + " ms (SYN unanswered: link down or filtered?)";
            return ncclRemoteError;
          }
          pollfd p{s.fd(), POLLOUT, 0};
          int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, kAbortSliceMs)));
          if (n < 0 && errno != EINTR) return ncclSystemError;
          ready = n > 0;
        }
        socklen_t errLen = sizeof(err);
        if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &errLen) != 0) err = errno;
      }
    }
    if (err == 0) {
      if (!setBlocking(s.fd(), true)) {
        *why = strerror(errno);
        return ncclSystemError;
      }
      setNoDelay(s.fd());
      *out = std::move(s);
      return ncclSuccess;
    }
    *why = strerror(err);
    if (err != ECONNREFUSED || !retryRefused) return ncclRemoteError;  // unreachable, no route: retrying will not help
    if (!sleepUnlessAborted(std::min<int64_t>(100, left), abortFlag)) return ncclInternalError;
  }
}

}  // namespace accl::net
