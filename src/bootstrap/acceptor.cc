// acceptor.cc: concurrent handshake reading for bootstrap listeners (see acceptor.h).
#include "bootstrap/acceptor.h"
#include <fcntl.h>
#include <poll.h>
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include "bootstrap/wire.h"
#include "base/log.h"

namespace accl::boot {

namespace {

using Clock = std::chrono::steady_clock;
using net::kAbortSliceMs;

std::string peerAddress(int fd) {
  net::SockAddr addr;
  addr.len = sizeof(addr.ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr.ss), &addr.len) != 0) return "<unknown>";
  return addr.str();
}

int msUntil(Clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, INT32_MAX));
}

}  // namespace

HandshakeAcceptor::HandshakeAcceptor(const net::Socket& listener, uint64_t magic, size_t headerSize, std::string what,
                                     bool passForeign)
    : listener_(listener), magic_(magic), headerSize_(headerSize), what_(std::move(what)), passForeign_(passForeign) {
  // A connection reset between poll() and accept() must not block accept().
  int flags = fcntl(listener_.fd(), F_GETFL);
  if (flags >= 0) fcntl(listener_.fd(), F_SETFL, flags | O_NONBLOCK);
}

HandshakeAcceptor::~HandshakeAcceptor() {
  acceptNew();  // whatever is still in the kernel's backlog
  for (Pending& p : pending_) {
    bool complete = false;
    if (readSome(p, &complete) && !complete) continue;  // readSome logged why it dropped it
    WARN_ASIDE("%s: dropped connection from %s at shutdown: %s (%zu of %zu handshake bytes)", what_.c_str(),
         p.from.c_str(), complete ? "a handshake nobody expected (replayed or duplicate)" : "incomplete handshake",
         p.got, p.buf.size());
  }
}

void HandshakeAcceptor::acceptNew() {
  for (;;) {
    int fd = accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN (drained), or an error the next poll will show again
    Pending p;
    p.sock = net::Socket(fd);
    p.buf.resize(headerSize_);
    p.deadline = Clock::now() + std::chrono::milliseconds(kHandshakeTimeoutMs);
    p.from = peerAddress(fd);
    pending_.push_back(std::move(p));
  }
}

bool HandshakeAcceptor::readSome(Pending& p, bool* complete) {
  *complete = false;
  ssize_t n = ::recv(p.sock.fd(), p.buf.data() + p.got, p.buf.size() - p.got, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  if (n <= 0) {
    WARN_ASIDE("%s: dropped connection from %s: closed after %zu of %zu handshake bytes", what_.c_str(),
         p.from.c_str(), p.got, p.buf.size());
    return true;
  }
  size_t before = p.got;
  p.got += static_cast<size_t>(n);
  if (before < sizeof(uint64_t) && p.got >= sizeof(uint64_t)) {
    uint64_t magic;
    std::memcpy(&magic, p.buf.data(), sizeof(magic));
    if (magic != magic_ && !passForeign_) {
      WARN_ASIDE("%s: dropped connection from %s: wrong magic 0x%016" PRIx64 " (not this job)", what_.c_str(),
           p.from.c_str(), magic);
      return true;
    }
  }
  *complete = p.got == p.buf.size();
  return *complete;
}

ncclResult_t HandshakeAcceptor::next(Arrival* out, const std::atomic<int>* abortFlag, int timeoutMs) {
  auto start = Clock::now();
  std::vector<pollfd> fds;
  for (;;) {
    if (abortFlag && abortFlag->load(std::memory_order_relaxed)) return ncclInternalError;
    auto now = Clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->deadline <= now) {
        WARN_ASIDE("%s: dropped connection from %s: no handshake within %d ms", what_.c_str(), it->from.c_str(),
             kHandshakeTimeoutMs);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    int slice = kAbortSliceMs;
    if (timeoutMs >= 0) {
      int left = msUntil(start + std::chrono::milliseconds(timeoutMs));
      if (left == 0) return ncclRemoteError;
      slice = std::min(slice, left);
    }
    for (const Pending& p : pending_) slice = std::min(slice, msUntil(p.deadline) + 1);

    fds.assign(1, pollfd{listener_.fd(), POLLIN, 0});
    for (const Pending& p : pending_) fds.push_back(pollfd{p.sock.fd(), POLLIN, 0});
    int n = poll(fds.data(), fds.size(), slice);
    if (n < 0 && errno != EINTR) {
      WARN("%s: poll failed: %s", what_.c_str(), strerror(errno));
      return ncclSystemError;
    }
    if (n <= 0) continue;
    // Serve the pending handshakes first (their indices match fds[1..]), then accept new ones.
    for (size_t i = pending_.size(); i-- > 0;) {
      if (fds[i + 1].revents == 0) continue;
      bool complete = false;
      if (!readSome(pending_[i], &complete)) continue;
      if (complete) {
        out->sock = std::move(pending_[i].sock);
        out->header = std::move(pending_[i].buf);
        out->from = std::move(pending_[i].from);
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        return ncclSuccess;
      }
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      // The listener was shut down (abort) or is broken.
      if (abortFlag && abortFlag->load(std::memory_order_relaxed)) return ncclInternalError;
      WARN("%s: listening socket failed", what_.c_str());
      return ncclSystemError;
    }
    if (fds[0].revents & POLLIN) acceptNew();
  }
}

}  // namespace accl::boot
