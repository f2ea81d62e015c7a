// socket.h: TCP helpers shared by bootstrap and the socket transport: addresses,
// listen/connect with NCCL's retry rules, and whole-buffer I/O that an abort flag can interrupt.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>
#include <atomic>
#include <cstdint>
#include <string>
#include "nccl.h"

namespace accl::net {

// Every blocking socket wait (poll, connect backoff, bootstrap accepts) is cut into slices at
// most this long, so an abort flag or a deadline is seen within about one slice. 20 ms: a
// waiting thread wakes 50 times a second, nothing next to an abort that takes effect at once
// (with 100 ms, an abort raised just after a slice began went unseen for up to 100 ms, and
// Socket.AbortFlagInterruptsBlockedRecvWithin200ms failed under load).
inline constexpr int kAbortSliceMs = 20;

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family() const { return ss.ss_family; }
  int port() const;
  void setPort(int port);
  std::string str() const;  // "1.2.3.4:5678" or "[fe80::1%eth0]:5678"
};

// Parses NCCL_COMM_ID syntax: "<ipv4>:<port>", "<hostname>:<port>", "[<ipv6>]:<port>".
ncclResult_t parseHostPort(const char* text, SockAddr* out);

// An owned socket file descriptor (closed on destruction).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void close();
  void shutdownBoth();  // wakes any thread blocked on this socket

 private:
  int fd_ = -1;
};

// Listens on `addr` (port 0 = any); `bound` receives the actual address. If the address is
// in use, bind is retried for up to bindRetryMs (a fixed NCCL_COMM_ID port briefly held).
ncclResult_t listenOn(const SockAddr& addr, Socket* out, SockAddr* bound, int backlog = 1024,
                      int bindRetryMs = 0);

// Connects with NCCL_SOCKET_RETRY_CNT / NCCL_SOCKET_RETRY_SLEEP_MSEC retries; sets TCP_NODELAY.
// `abortFlag` (may be null) stops retrying when it becomes non-zero.
ncclResult_t connectTo(const SockAddr& addr, Socket* out, const std::atomic<int>* abortFlag = nullptr);

// Accepts one connection; gives up after timeoutMs (<0: wait forever) or when abortFlag is set.
ncclResult_t acceptOne(const Socket& listener, Socket* out, int timeoutMs, const std::atomic<int>* abortFlag = nullptr);

// Sends/receives exactly `size` bytes. An orderly EOF or reset returns ncclRemoteError
// (WARN names `peerDesc`), as does a timeout. timeoutMs < 0 waits forever; abortFlag
// (checked at least every 100 ms) interrupts with ncclInternalError and no WARN.
ncclResult_t sendAll(const Socket& s, const void* data, size_t size, const char* peerDesc,
                     const std::atomic<int>* abortFlag = nullptr, int timeoutMs = -1);
ncclResult_t recvAll(const Socket& s, void* data, size_t size, const char* peerDesc,
                     const std::atomic<int>* abortFlag = nullptr, int timeoutMs = -1);

// Sends `sendSize` bytes to `to` while receiving `recvSize` bytes from `from`, so that a ring
// of ranks all sending first cannot deadlock on full socket buffers. Same errors as above.
ncclResult_t sendRecvAll(const Socket& to, const void* sendData, size_t sendSize, const char* toDesc,
                         const Socket& from, void* recvData, size_t recvSize, const char* fromDesc,
                         const std::atomic<int>* abortFlag = nullptr, int timeoutMs = -1);

// Non-blocking check: true if the peer closed the connection (EOF/reset), false if it is
// open (pending data is not consumed).
bool peerClosed(const Socket& s);

// Applies large send/receive buffers (ACCL_SOCKET_BUF_BYTES) and TCP_NODELAY (socket transport).
void tuneForBulk(const Socket& s);

// Makes a dead link fail the connection within about timeoutMs: TCP_USER_TIMEOUT bounds how
// long sent data may stay unacknowledged, and keepalive probes an idle connection. 0: no-op.
void failDeadLinkWithin(const Socket& s, int timeoutMs);

// One connection attempt bounded by a deadline: refused connects are retried (the peer may not
// be listening yet) until timeoutMs elapses. No WARN; on failure *why says what happened
// ("Connection refused", "no answer within 5000 ms"). ncclInternalError if aborted.
// retryRefused=false: a refusal ends the attempt at once (a probe: the host answered).
// `local` (optional): the source address to bind first (port 0), e.g. one rail's interface.
ncclResult_t connectWithin(const SockAddr& addr, Socket* out, int timeoutMs, std::string* why,
                           const std::atomic<int>* abortFlag = nullptr, bool retryRefused = true,
                           const SockAddr* local = nullptr);

}  // namespace accl::net
