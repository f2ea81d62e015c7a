// bootstrap.cc: a connected Bootstrap: ring allGather/barrier, neighbour liveness, abort,
// and sorting the connections other ranks open to our listener.
#include <sys/socket.h>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include "bootstrap/bootstrap_impl.h"
#include "base/check.h"
#include "base/log.h"

namespace accl {

Bootstrap::Bootstrap(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
// A graceful exit leaves a byte on the ring sockets before they close, so a neighbour that
// is still waiting on other peers never mistakes our orderly departure for a crash
// (closedNeighbour() reports only a bare EOF, which is what a killed process leaves).
Bootstrap::~Bootstrap() {
  if (!impl_ || impl_->aborted) return;
  const char goodbye = 'G';
  for (const net::Socket* s : {&impl_->ringPrev, &impl_->ringNext}) {
    if (s->valid()) (void)::send(s->fd(), &goodbye, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
}

int Bootstrap::rank() const { return impl_->rank; }
int Bootstrap::nranks() const { return impl_->nranks; }
uint64_t Bootstrap::magic() const { return impl_->magic; }

ncclResult_t Bootstrap::Impl::handshakeTo(int peer, boot::Purpose purpose, boot::Handshake* out) const {
  if (boot::makeHandshake(magic, rank, purpose, peer, connKey, out)) return ncclSuccess;
  WARN("Bootstrap rank %d: getrandom failed for a handshake nonce: %s", rank, strerror(errno));
  return ncclSystemError;
}

ncclResult_t Bootstrap::Impl::waitForConnection(int peer, boot::Purpose purpose, int timeoutMs) {
  auto arrived = [&]() {
    if (purpose == boot::Purpose::Ring) return ringPrev.valid();
    std::lock_guard<std::mutex> lock(socketsMu);
    return p2pIn.count(peer) > 0;
  };
  while (!arrived()) {
    boot::HandshakeAcceptor::Arrival arrival;
    NCCLCHECK(acceptor->next(&arrival, abortFlag, timeoutMs));
    boot::Handshake hs;
    std::string bad = boot::decodeHandshake(arrival.header.data(), arrival.header.size(), magic, nranks, rank, &hs);
    if (bad.empty() && !boot::handshakeAuthentic(hs, connKey)) {
      bad = "handshake failed authentication (not a rank of this communicator: it knows the magic but not the "
            "key the root gave the ranks, or ACCL_JOB_SECRET differs)";
    } else if (bad.empty() && !replay.firstUse(hs.nonce)) {
      bad = "replayed handshake (its nonce was used before)";
    }
    if (!bad.empty()) {
      WARN_ASIDE("Bootstrap rank %d: dropped connection from %s: %s", rank, arrival.from.c_str(), bad.c_str());
      continue;
    }
    bool known = true;
    if (known && hs.purpose == boot::Purpose::Ring && hs.rank == prev() && !ringPrev.valid()) {
      ringPrev = std::move(arrival.sock);
      continue;
    }
    if (known && hs.purpose == boot::Purpose::P2p) {
      std::lock_guard<std::mutex> lock(socketsMu);
      if (p2pIn.emplace(hs.rank, std::move(arrival.sock)).second) continue;
    }
    WARN_ASIDE("Bootstrap rank %d: dropped unexpected connection from %s (rank %d, purpose %d)", rank,
         arrival.from.c_str(), hs.rank, static_cast<int>(hs.purpose));
  }
  return ncclSuccess;
}

int Bootstrap::Impl::waitMs() const {
  if (deadline == std::chrono::steady_clock::time_point::max()) return -1;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 1, INT32_MAX));
}

ncclResult_t Bootstrap::Impl::waited(ncclResult_t res, int peer, const char* what) const {
  if (res == ncclSuccess || deadline == std::chrono::steady_clock::time_point::max() ||
      std::chrono::steady_clock::now() + std::chrono::milliseconds(50) < deadline)  // waits end on whole ms
    return res;
  WARN("Bootstrap: rank %d of %d: waited ACCL_INIT_TIMEOUT=%lld s for %s during %s (%s): it is stuck or stopped "
       "before that point of its init, or slower than the others by that much; failing the init",
       rank, nranks, static_cast<long long>(deadlineSec), desc(peer), deadlineWhat.c_str(), what);
  return ncclRemoteError;
}

void Bootstrap::setDeadline(int64_t seconds, const std::string& what) {
  Impl& b = *impl_;
  std::lock_guard<std::mutex> ring(b.ringMu);
  std::lock_guard<std::mutex> recv(b.recvMu);
  b.deadline = seconds > 0 ? std::chrono::steady_clock::now() + std::chrono::seconds(seconds)
                           : std::chrono::steady_clock::time_point::max();
  b.deadlineSec = seconds;
  b.deadlineWhat = what;
}

ncclResult_t Bootstrap::allGather(void* data, size_t bytesPerRank) {
  Impl& b = *impl_;
  std::lock_guard<std::mutex> lock(b.ringMu);
  char* slots = static_cast<char*>(data);
  // Step s: pass on the slot received in step s-1 (our own first); n-1 steps fill every slot.
  for (int step = 0; step < b.nranks - 1; ++step) {
    int sendSlot = (b.rank - step + b.nranks) % b.nranks;
    int recvSlot = (b.rank - step - 1 + b.nranks) % b.nranks;
    ncclResult_t res = net::sendRecvAll(b.ringNext, slots + sendSlot * bytesPerRank, bytesPerRank, b.desc(b.next()),
                                        b.ringPrev, slots + recvSlot * bytesPerRank, bytesPerRank, b.desc(b.prev()),
                                        b.abortFlag, b.waitMs());
    res = b.waited(res, b.prev(), "an all-gather over the bootstrap ring: its part, or a part it passes on");
    if (res != ncclSuccess) return b.result(res);
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::barrier() {
  std::vector<char> bytes(impl_->nranks);
  return allGather(bytes.data(), 1);
}

namespace {

// Sent on the ring sockets by a rank that fails, just before it closes them.
constexpr char kFailureNotice[8] = {'A', 'C', 'C', 'L', 'F', 'A', 'I', 'L'};

// -2: open and healthy; -1: failed without naming a culprit; >= 0: the culprit it named.
// Only peeks, so bytes of a concurrent bootstrap exchange are never consumed.
int neighbourState(const net::Socket& s, int neighbour) {
  if (!s.valid()) return neighbour;
  char buf[sizeof(kFailureNotice) + sizeof(int32_t)];
  ssize_t n = ::recv(s.fd(), buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
  if (n == static_cast<ssize_t>(sizeof(buf)) && std::memcmp(buf, kFailureNotice, sizeof(kFailureNotice)) == 0) {
    int32_t culprit;
    std::memcpy(&culprit, buf + sizeof(kFailureNotice), sizeof(culprit));
    return culprit >= 0 ? culprit : neighbour;
  }
  if (n > 0) return -2;  // a goodbye (orderly exit) or bootstrap traffic
  if (n == 0) return neighbour;  // bare EOF: the process is gone
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -2 : neighbour;
}

}  // namespace

int Bootstrap::closedNeighbour(int* culprit) const {
  const Impl& b = *impl_;
  if (b.nranks == 1) return -1;
  for (auto [sock, rank] : {std::pair{&b.ringPrev, b.prev()}, std::pair{&b.ringNext, b.next()}}) {
    int state = neighbourState(*sock, rank);
    if (state == -2) continue;
    if (culprit) *culprit = state;
    return rank;
  }
  return -1;
}

std::vector<int> Bootstrap::neighbourFds() const {
  std::vector<int> fds;
  for (const net::Socket* s : {&impl_->ringPrev, &impl_->ringNext}) {
    if (s->valid()) fds.push_back(s->fd());
  }
  return fds;
}

void Bootstrap::closeRing(int culprit) {
  Impl& b = *impl_;
  char notice[sizeof(kFailureNotice) + sizeof(int32_t)];
  std::memcpy(notice, kFailureNotice, sizeof(kFailureNotice));
  int32_t c = culprit;
  std::memcpy(notice + sizeof(kFailureNotice), &c, sizeof(c));
  std::lock_guard<std::mutex> lock(b.socketsMu);
  for (net::Socket* s : {&b.ringNext, &b.ringPrev}) {
    if (s->valid()) (void)::send(s->fd(), notice, sizeof(notice), MSG_DONTWAIT | MSG_NOSIGNAL);
    s->shutdownBoth();
  }
}

void Bootstrap::abort() {
  Impl& b = *impl_;
  b.aborted = true;
  b.ownAbort = 1;
  std::lock_guard<std::mutex> lock(b.socketsMu);
  b.listener.shutdownBoth();
  b.ringNext.shutdownBoth();
  b.ringPrev.shutdownBoth();
  for (auto& [peer, sock] : b.p2pOut) sock.shutdownBoth();
  for (auto& [peer, sock] : b.p2pIn) sock.shutdownBoth();
}

}  // namespace accl
