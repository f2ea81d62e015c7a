// socket_link.cc: shared state of a striped socket connection, and how its failures are told.
#include "transports/socket/socket_link.h"
#include <net/if.h>
#include <new>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include "base/log.h"
#include "topo/ifaces.h"

namespace accl {

// Why a connection may have died, from our side: the interface it uses went away.
std::string localInterfaceState(const std::string& ifname) {
  if (ifname.empty()) return "";
  bool present = false;
  for (const topo::NetIf& nif : topo::listInterfaces()) {
    if (nif.name != ifname) continue;
    present = true;
    if (nif.running) return "";
  }
  return present ? "; local interface " + ifname + " is down" : "; local interface " + ifname + " has no address";
}

bool interfaceDown(const std::string& ifname) {
  static const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);  // for ioctls only, kept
  if (fd < 0 || ifname.empty() || ifname.size() >= IFNAMSIZ) return false;
  ifreq req{};
  std::memcpy(req.ifr_name, ifname.data(), ifname.size());
  if (ioctl(fd, SIOCGIFFLAGS, &req) != 0) return errno == ENODEV;
  return !(req.ifr_flags & IFF_UP) || !(req.ifr_flags & IFF_RUNNING);
}

std::string SocketPeer::describe() const {
  return "rank " + std::to_string(rank) + " (host " + (host.empty() ? "?" : host) + ", " + addr + ", interface " +
         (ifname.empty() ? "?" : ifname) + ")";
}

std::string SocketPeer::describeRail(int rail) const {
  if (railAddrs.empty() || rail < 0) return describe();
  SocketPeer onRail = *this;
  onRail.addr = railAddrs[static_cast<size_t>(rail)];
  onRail.ifname = railIfnames[static_cast<size_t>(rail)];
  onRail.railAddrs.clear();
  return onRail.describe();
}

StagingRing::StagingRing(size_t capacity) : cap(capacity) {
  constexpr size_t kPage = 4096;
  const size_t bytes = (capacity + kPage - 1) / kPage * kPage;
  buf.reset(static_cast<char*>(std::aligned_alloc(kPage, bytes ? bytes : kPage)));
  if (!buf) throw std::bad_alloc();
}

StreamDir::StreamDir(size_t cap, const Stripe& stripe)
    : ring(cap), cursor(new std::atomic<uint64_t>[static_cast<size_t>(stripe.nsocks)]), nsocks(stripe.nsocks) {
  for (int s = 0; s < nsocks; s++) cursor[s].store(stripe.firstPos(s), std::memory_order_relaxed);
}

void StreamDir::publishMin(std::atomic<uint64_t>& end) const {
  uint64_t low = cursor[0].load(std::memory_order_acquire);
  for (int s = 1; s < nsocks; s++) low = std::min(low, cursor[s].load(std::memory_order_acquire));
  uint64_t cur = end.load(std::memory_order_relaxed);
  while (cur < low && !end.compare_exchange_weak(cur, low, std::memory_order_seq_cst)) {
  }
}

SocketLink::SocketLink(std::vector<net::Socket> sockets, size_t ringBytes, const Stripe& st, Doorbell* b,
                       SocketPeer p)
    : socks(std::move(sockets)),
      stripe(st),
      out(ringBytes, st),
      in(ringBytes, st),
      bell(b),
      peer(std::move(p)),
      eof(new std::atomic<bool>[static_cast<size_t>(st.nsocks)]),
      sendBusy(new std::atomic<bool>[static_cast<size_t>(st.nsocks)]),
      recvBusy(new std::atomic<bool>[static_cast<size_t>(st.nsocks)]) {
  for (int s = 0; s < st.nsocks; s++) {
    eof[s].store(false, std::memory_order_relaxed);
    sendBusy[s].store(false, std::memory_order_relaxed);
    recvBusy[s].store(false, std::memory_order_relaxed);
  }
}

namespace {

bool transient(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

// Holds one socket direction for the current thread, or nothing if another thread has it.
class TryHold {
 public:
  explicit TryHold(std::atomic<bool>& busy) : busy_(busy), held_(!busy.exchange(true, std::memory_order_acquire)) {}
  ~TryHold() {
    if (held_) busy_.store(false, std::memory_order_release);
  }
  bool held() const { return held_; }

 private:
  std::atomic<bool>& busy_;
  bool held_;
};

}  // namespace

bool SocketLink::pumpSend(int s) {
  if (lostSocket(s)) return false;
  TryHold hold(sendBusy[s]);
  if (!hold.held()) return false;
  bool moved = false;
  for (;;) {
    uint64_t pos = out.cursor[s].load(std::memory_order_relaxed);
    uint64_t tail = out.ring.tail.load(std::memory_order_acquire);
    if (tail <= pos) return moved;
    uint64_t end = std::min(tail, stripe.chunkEnd(pos));
    const uint64_t spanEnd = out.span.end.load(std::memory_order_acquire);
    const uint64_t spanStart = out.span.start.load(std::memory_order_relaxed);
    const char* from;
    bool replayed = false;
    if (nrails_ > 1 && pos < resendEnd_[s].load(std::memory_order_relaxed)) {
      // Sent before on a socket that failed: the ring may have moved on, the copy has it.
      from = replayAt(s, pos);
      end = std::min(end, resendEnd_[s].load(std::memory_order_relaxed));
      replayed = true;
    } else if (pos >= spanStart && pos < spanEnd) {
      from = out.span.base.load(std::memory_order_relaxed) + (pos - spanStart);
      end = std::min(end, spanEnd);
    } else {
      from = out.ring.at(pos);
      if (pos < spanStart) end = std::min(end, spanStart);
    }
    const size_t len = static_cast<size_t>(end - pos);
    ssize_t n = ::send(socks[s].fd(), from, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      // Kept until the peer has surely read it (the socket's buffers cannot hold more).
      if (nrails_ > 1 && !replayed) std::memcpy(replayAt(s, pos), from, static_cast<size_t>(n));
      out.cursor[s].store(stripe.advance(pos, static_cast<size_t>(n)), std::memory_order_release);
      moved = true;
      if (static_cast<size_t>(n) < len) return moved;  // socket buffer full: another try gets EAGAIN
      continue;
    }
    if (n < 0 && transient(errno)) return moved;
    if (n < 0) failOnSocketError(errno, std::string("send: ") + strerror(errno), s);
    else fail(ncclRemoteError, "send: no progress", s);
    return moved;
  }
}

bool SocketLink::pumpRecv(int s) {
  if (lostSocket(s)) return false;
  TryHold hold(recvBusy[s]);
  if (!hold.held()) return false;
  bool moved = false;
  while (!eof[s].load(std::memory_order_relaxed)) {
    uint64_t pos = in.cursor[s].load(std::memory_order_relaxed);
    uint64_t limit = std::min(in.ring.head.load(std::memory_order_acquire) + in.ring.cap, stripe.chunkEnd(pos));
    if (limit <= pos) return moved;
    const size_t want = static_cast<size_t>(limit - pos);
    ssize_t n = ::recv(socks[s].fd(), in.ring.at(pos), want, MSG_DONTWAIT);
    if (n > 0) {
      in.cursor[s].store(stripe.advance(pos, static_cast<size_t>(n)), std::memory_order_release);
      moved = true;
      // A short read drained the socket: asking again would cost a syscall to hear EAGAIN
      // (for a small message, one of the two syscalls per receive).
      if (static_cast<size_t>(n) < want) return moved;
      continue;
    }
    if (n < 0 && transient(errno)) return moved;
    if (n == 0 || errno == ECONNRESET || errno == EPIPE) {
      // Only an error if the receiver later waits for bytes that never came (see peek()).
      eof[s].store(true, std::memory_order_release);
      return true;
    }
    fail(ncclRemoteError, std::string("recv: ") + strerror(errno), s);
    return moved;
  }
  return moved;
}

void SocketLink::failOnSocketError(int err, const std::string& what, int sock) {
  // Before fail(): whoever sees the failure may ask closedByPeer() at once. With several
  // rails a reset loses one socket, not the peer.
  if ((err == ECONNRESET || err == EPIPE) && !(sock >= 0 && failoverOn()))
    endedByPeer.store(true, std::memory_order_release);
  fail(ncclRemoteError, what, sock);
}

void SocketLink::fail(int result, const std::string& what, int sock) {
  if (sock >= 0 && failoverOn() && !stopping.load() && !closedLocally.load()) {
    loseSocket(sock, what);
    return;
  }
  int expected = 0;
  if (error.compare_exchange_strong(expected, result) && !closedLocally.load()) {
    const int rail = sock < 0 ? -1 : failoverOn() ? railNow(sock) : peer.railOf(sock);
    WARN("rank %d: socket connection to %s failed: %s%s", peer.myRank, peer.describeRail(rail).c_str(), what.c_str(),
         localInterfaceState(peer.ifnameOfRail(rail)).c_str());
  }
  ringDoorbell(bell);
}

void SocketLink::onPollEvents(int s, uint32_t gen, int fd, short events, short revents) {
  const bool failover = failoverOn();
  if (!(revents & POLLERR) && !(failover && (revents & POLLHUP))) return;
  std::unique_lock<std::mutex> lk(failoverMu_, std::defer_lock);
  if (failover) {
    // With several rails an acceptor thread may have swapped the socket while we polled: the
    // old one's hang-up or reset (the peer closed it after the swap) would otherwise mark the
    // new one ended or lost, and that stripe would stall until the link failed.
    lk.lock();
    if (gen_[s].load(std::memory_order_relaxed) != gen || lostSocket(s)) return;
  }
  if (failover && (revents & POLLHUP) && !(revents & POLLERR)) {
    // Closed: met as an EOF, as pumpRecv does.
    eof[s].store(true, std::memory_order_release);
    return;
  }
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0 && failover && (err == ECONNRESET || err == EPIPE) && events == 0) {
    // A reset of an idle socket is most likely the peer closing its communicator: an EOF,
    // an error only if someone waits for its bytes (SocketLink::blockedOnEof).
    eof[s].store(true, std::memory_order_release);
    return;
  }
  if (err != 0) failOnSocketError(err, std::string("socket error: ") + strerror(err), s);
}

bool SocketLink::blockedOnEof(uint64_t waitPos) const {
  // Not the published tail: pumpRecv marks eof after moving the socket's last bytes, and its
  // caller publishes them only later. The socket's own cursor (stored before eof) says
  // whether it delivered the awaited byte.
  const int s = stripe.socketOf(waitPos);
  // A lost socket (several rails) is being replaced: its end says nothing about the peer.
  if (lostSocket(s)) return false;
  return eof[s].load(std::memory_order_acquire) && in.cursor[s].load(std::memory_order_acquire) <= waitPos;
}

}  // namespace accl
