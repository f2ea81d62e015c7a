#include "transports/socket/socket_transport.h"
#include <sys/socket.h>
#include <cerrno>
#include <cstring>
#include <vector>
#include "core/check.h"

namespace accl {
namespace {

// A power-of-two byte ring in ordinary memory.
struct StagingRing {
  explicit StagingRing(size_t cap) : buf(cap), cap(cap) {}
  std::vector<char> buf;
  size_t cap;
  uint64_t head = 0;  // consumed
  uint64_t tail = 0;  // produced
  size_t used() const { return tail - head; }
  size_t contiguousFree() const {
    size_t off = tail & (cap - 1);
    size_t free = cap - used();
    return free < cap - off ? free : cap - off;
  }
  size_t contiguousUsed() const {
    size_t off = head & (cap - 1);
    return used() < cap - off ? used() : cap - off;
  }
  char* tailPtr() { return buf.data() + (tail & (cap - 1)); }
  char* headPtr() { return buf.data() + (head & (cap - 1)); }
};

class SocketConnection;

class SocketSend final : public SendChannel {
 public:
  SocketSend(SocketConnection* conn, size_t cap) : conn_(conn), ring_(cap) {}
  ncclResult_t acquire(void** buf, size_t* avail) override;
  void commit(size_t n) override { ring_.tail += n; }
  ncclResult_t progress() override;
  bool pendingLocal() const override { return ring_.used() != 0; }
  uint64_t position() const override { return ring_.tail; }
  int fd() const override;

 private:
  SocketConnection* conn_;
  StagingRing ring_;
};

class SocketRecv final : public RecvChannel {
 public:
  SocketRecv(SocketConnection* conn, size_t cap) : conn_(conn), ring_(cap) {}
  ncclResult_t peek(const void** buf, size_t* avail) override;
  void release(size_t n) override { ring_.head += n; }
  uint64_t position() const override { return ring_.head; }
  ncclResult_t progress() override;
  int fd() const override;

 private:
  SocketConnection* conn_;
  StagingRing ring_;
  bool eof_ = false;
};

class SocketConnection final : public PeerConnection {
 public:
  SocketConnection(net::Socket sock, size_t cap, int peerRank)
      : sock_(std::move(sock)), peerRank_(peerRank), send_(this, cap), recv_(this, cap) {}
  SendChannel* send() override { return &send_; }
  RecvChannel* recv() override { return &recv_; }
  void close() override {
    closed_ = true;
    sock_.shutdownBoth();
  }
  const char* transportName() const override { return "Socket"; }
  int fd() const { return sock_.fd(); }
  int peerRank() const { return peerRank_; }
  bool closedLocally() const { return closed_; }

 private:
  net::Socket sock_;
  int peerRank_;
  bool closed_ = false;
  SocketSend send_;
  SocketRecv recv_;
};

int SocketSend::fd() const { return conn_->fd(); }
int SocketRecv::fd() const { return conn_->fd(); }

ncclResult_t SocketSend::acquire(void** buf, size_t* avail) {
  if (conn_->closedLocally()) {
    WARN("socket connection to rank %d was closed (communicator aborted)", conn_->peerRank());
    return ncclRemoteError;
  }
  *buf = ring_.tailPtr();
  *avail = ring_.contiguousFree();
  return ncclSuccess;
}

ncclResult_t SocketSend::progress() {
  while (ring_.used() > 0) {
    ssize_t n = ::send(conn_->fd(), ring_.headPtr(), ring_.contiguousUsed(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      ring_.head += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    if (n < 0 && errno == EINTR) continue;
    WARN("socket send to rank %d failed: %s (peer died or closed the connection)", conn_->peerRank(),
         n < 0 ? strerror(errno) : "no progress");
    return ncclRemoteError;
  }
  return ncclSuccess;
}

ncclResult_t SocketRecv::peek(const void** buf, size_t* avail) {
  *buf = ring_.headPtr();
  *avail = ring_.contiguousUsed();
  if (*avail == 0 && (eof_ || conn_->closedLocally())) {
    WARN("socket connection from rank %d closed before the expected data arrived (peer died or aborted)",
         conn_->peerRank());
    return ncclRemoteError;
  }
  return ncclSuccess;
}

ncclResult_t SocketRecv::progress() {
  while (!eof_ && ring_.contiguousFree() > 0) {
    ssize_t n = ::recv(conn_->fd(), ring_.tailPtr(), ring_.contiguousFree(), MSG_DONTWAIT);
    if (n > 0) {
      ring_.tail += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      eof_ = true;  // an error only if we later wait for data that never came (see peek)
      break;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EINTR) continue;
    if (errno == ECONNRESET || errno == EPIPE) {
      eof_ = true;
      break;
    }
    WARN("socket recv from rank %d failed: %s", conn_->peerRank(), strerror(errno));
    return ncclRemoteError;
  }
  return ncclSuccess;
}

}  // namespace

std::unique_ptr<PeerConnection> makeSocketConnection(net::Socket sock, size_t ringBytes, int peerRank) {
  return std::make_unique<SocketConnection>(std::move(sock), ringBytes, peerRank);
}

}  // namespace accl
