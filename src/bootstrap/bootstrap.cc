// bootstrap.cc: a connected Bootstrap: ring allGather/barrier, neighbour liveness, abort,
// and sorting the connections other ranks open to our listener.
#include <sys/socket.h>
#include <cstring>
#include "bootstrap/bootstrap_impl.h"
#include "core/check.h"
#include "core/log.h"

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
    std::memcpy(&hs, arrival.header.data(), sizeof(hs));
    bool known = hs.rank >= 0 && hs.rank < nranks;
    if (known && hs.purpose == boot::Purpose::Ring && hs.rank == prev() && !ringPrev.valid()) {
      ringPrev = std::move(arrival.sock);
      continue;
    }
    if (known && hs.purpose == boot::Purpose::P2p) {
      std::lock_guard<std::mutex> lock(socketsMu);
      if (p2pIn.emplace(hs.rank, std::move(arrival.sock)).second) continue;
    }
    WARN("Bootstrap rank %d: dropped unexpected connection from %s (rank %d, purpose %d)", rank,
         arrival.from.c_str(), hs.rank, static_cast<int>(hs.purpose));
  }
  return ncclSuccess;
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
                                        b.abortFlag);
    if (res != ncclSuccess) return b.result(res);
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::barrier() {
  std::vector<char> bytes(impl_->nranks);
  return allGather(bytes.data(), 1);
}

int Bootstrap::closedNeighbour() const {
  const Impl& b = *impl_;
  if (b.nranks == 1) return -1;
  if (net::peerClosed(b.ringPrev)) return b.prev();
  if (net::peerClosed(b.ringNext)) return b.next();
  return -1;
}

std::vector<int> Bootstrap::neighbourFds() const {
  std::vector<int> fds;
  for (const net::Socket* s : {&impl_->ringPrev, &impl_->ringNext}) {
    if (s->valid()) fds.push_back(s->fd());
  }
  return fds;
}

void Bootstrap::closeRing() {
  Impl& b = *impl_;
  std::lock_guard<std::mutex> lock(b.socketsMu);
  b.ringNext.shutdownBoth();
  b.ringPrev.shutdownBoth();
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
