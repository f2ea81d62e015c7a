// rail_failover.cc: a striped connection over several rails keeps going when one fails.
// Every socket is one stripe of the stream (chunks s, s+K, ...); what its receiver has read is
// its receive cursor. A socket whose TCP connection fails (link down, reset, bytes unacked or
// keepalives unanswered for ACCL_RAIL_TIMEOUT) is "lost": the side that connected opens a new
// socket on another rail and both ends swap cursors in a handshake; each then sends that
// stripe again from the peer's cursor, from a copy of the stripe's last bytes (at most what the
// two socket buffers can hold was in flight). The receiver never sees a byte twice or misses
// one: it reads every stripe in order, just from a new socket. Every ACCL_RAIL_RETRY_SEC the
// connecting side tries the socket's own rail again and moves it back when it answers.
#include <sys/socket.h>
#include <algorithm>
#include <cstring>
#include <thread>
#include "base/log.h"
#include "base/param.h"
#include "transports/socket/socket_link.h"

namespace accl {

int64_t SocketLink::nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SocketLink::enableFailover(int nrails, int perRail, Redial redial, std::function<void()> wakeHelpers) {
  const int n = stripe.nsocks;
  replay_.resize(static_cast<size_t>(n));
  resendEnd_.reset(new std::atomic<uint64_t>[static_cast<size_t>(n)]);
  lost_.reset(new std::atomic<bool>[static_cast<size_t>(n)]);
  onRail_.reset(new std::atomic<int>[static_cast<size_t>(n)]);
  lostAtMs_.reset(new std::atomic<int64_t>[static_cast<size_t>(n)]);
  movedAtMs_.reset(new std::atomic<int64_t>[static_cast<size_t>(n)]);
  gen_.reset(new std::atomic<uint32_t>[static_cast<size_t>(n)]);
  notified_.reset(new std::atomic<bool>[static_cast<size_t>(n)]);
  for (int s = 0; s < n; s++) {
    // Unacknowledged bytes sit in our send buffer, unread ones in the peer's receive buffer:
    // the copy covers both (the kernel reports the doubled sizes it really uses).
    int snd = 0, rcv = 0;
    socklen_t len = sizeof(int);
    getsockopt(socks[s].fd(), SOL_SOCKET, SO_SNDBUF, &snd, &len);
    len = sizeof(int);
    getsockopt(socks[s].fd(), SOL_SOCKET, SO_RCVBUF, &rcv, &len);
    uint64_t cap = stripe.chunk;
    while (cap < static_cast<uint64_t>(std::max(snd, 0)) + static_cast<uint64_t>(std::max(rcv, 0))) cap *= 2;
    replay_[s].buf.reset(new char[cap]);
    replay_[s].cap = cap;
    resendEnd_[s].store(0, std::memory_order_relaxed);
    lost_[s].store(false, std::memory_order_relaxed);
    onRail_[s].store(s / perRail, std::memory_order_relaxed);
    lostAtMs_[s].store(0, std::memory_order_relaxed);
    movedAtMs_[s].store(0, std::memory_order_relaxed);
    gen_[s].store(0, std::memory_order_relaxed);
    notified_[s].store(false, std::memory_order_relaxed);
    net::failDeadLinkWithin(socks[s], static_cast<int>(param::railTimeoutMsec()));
  }
  perRail_ = perRail;
  redial_ = std::move(redial);
  wakeHelpers_ = std::move(wakeHelpers);
  nrails_ = nrails;  // last: pumps look at it
}

void SocketLink::loseSocket(int s, const std::string& what) {
  if (lost_[s].exchange(true, std::memory_order_acq_rel)) return;
  lostAtMs_[s].store(nowMs(), std::memory_order_relaxed);
  if (railNow(s) == homeRail(s)) away_.fetch_add(1);  // otherwise already counted
  const int rail = railNow(s);
  // Aside: the calls go on over another rail and succeed, so this is not their last error (nor
  // why the communicator fails, if every rail goes: that is said when it happens).
  WARN_ASIDE("rank %d: rail %s to %s lost: socket %d: %s%s; its bytes continue on another rail", peer.myRank,
       peer.ifnameOfRail(rail).c_str(), peer.describeRail(rail).c_str(), s, what.c_str(),
       localInterfaceState(peer.ifnameOfRail(rail)).c_str());
  if (wakeHelpers_) wakeHelpers_();
}

void SocketLink::holdBoth(int s) {
  while (sendBusy[s].exchange(true, std::memory_order_acquire)) std::this_thread::yield();
  while (recvBusy[s].exchange(true, std::memory_order_acquire)) std::this_thread::yield();
}

void SocketLink::releaseBoth(int s) {
  recvBusy[s].store(false, std::memory_order_release);
  sendBusy[s].store(false, std::memory_order_release);
}

bool SocketLink::swapSocket(int s, int rail, net::Socket sock, uint64_t peerPos, const char* why) {
  std::lock_guard<std::mutex> lk(failoverMu_);
  const uint64_t sent = out.cursor[s].load(std::memory_order_relaxed);
  const uint64_t resendTo = std::max(sent, resendEnd_[s].load(std::memory_order_relaxed));
  // The peer's cursor must be one of this stripe's positions that we sent and still hold.
  if (peerPos > resendTo || stripe.socketOf(peerPos) != s ||
      stripe.subIndex(resendTo) - stripe.subIndex(peerPos) > replay_[s].cap) {
    fail(ncclInternalError, "socket " + std::to_string(s) + ": the peer resumes at byte " + std::to_string(peerPos) +
                                " which this side no longer holds (sent up to " + std::to_string(resendTo) + ")");
    return false;
  }
  const int from = railNow(s);
  net::failDeadLinkWithin(sock, static_cast<int>(param::railTimeoutMsec()));
  socks[s] = std::move(sock);  // closes the old one, under failoverMu_ (see onPollEvents)
  gen_[s].fetch_add(1, std::memory_order_release);
  notified_[s].store(false, std::memory_order_relaxed);
  resendEnd_[s].store(resendTo, std::memory_order_relaxed);
  out.cursor[s].store(peerPos, std::memory_order_release);
  eof[s].store(false, std::memory_order_relaxed);
  onRail_[s].store(rail, std::memory_order_relaxed);
  movedAtMs_[s].store(nowMs(), std::memory_order_relaxed);
  const bool wasLost = lost_[s].exchange(false, std::memory_order_acq_rel);
  const int before = wasLost || from != homeRail(s);
  const int after = rail != homeRail(s);
  away_.fetch_add(after - before);
  const uint64_t again = stripe.subIndex(resendTo) - stripe.subIndex(peerPos);
  WARN("rank %d: socket %d to rank %d now on rail %s (was %s): %s; sending again the %llu bytes that were in "
       "flight",
       peer.myRank, s, peer.rank, peer.ifnameOfRail(rail).c_str(), peer.ifnameOfRail(from).c_str(), why,
       static_cast<unsigned long long>(again));
  return true;
}

bool SocketLink::resumeOn(int s, int rail, int timeoutMs, const char* why) {
  net::Socket sock;
  if (redial_.connect(rail, timeoutMs, &sock) != ncclSuccess) return false;
  holdBoth(s);  // from here no byte of stripe s is read or sent until the swap
  uint64_t peerPos = 0;
  const uint64_t myPos = in.cursor[s].load(std::memory_order_relaxed);
  const bool answered = redial_.resume(sock, s, myPos, &peerPos) == ncclSuccess;
  bool ok = answered && swapSocket(s, rail, std::move(sock), peerPos, why);
  releaseBoth(s);
  if (!answered) {
    // The peer may have taken the new socket before its answer got lost: neither side can
    // trust the old one now. Lost, so that a fresh handshake sets both ends straight.
    loseSocket(s, "the handshake moving it to rail " + peer.ifnameOfRail(rail) + " got no answer");
  }
  if (ok && wakeHelpers_) wakeHelpers_();
  ringDoorbell(bell);
  return ok;
}

void SocketLink::loseSocketsOnDownInterfaces(const std::vector<int>& sockets) {
  for (int s : sockets) {
    if (lostSocket(s)) continue;
    const int rail = railNow(s);
    if (!interfaceDown(peer.ifnameOfRail(rail))) continue;
    std::lock_guard<std::mutex> lk(failoverMu_);  // not a socket an acceptor just swapped in
    // loseSocket adds "; local interface hpn1 is down".
    if (!lostSocket(s) && railNow(s) == rail) loseSocket(s, "no TCP error yet");
  }
}

void SocketLink::peerLost(int s, int rail) {
  if (!failoverOn() || s < 0 || s >= stripe.nsocks) return;
  std::lock_guard<std::mutex> lk(failoverMu_);  // the socket on `rail`, not one swapped in since
  if (!lostSocket(s) && railNow(s) == rail) loseSocket(s, "the peer's end failed (it told us on another rail)");
}

ncclResult_t SocketLink::acceptResume(int s, int rail, net::Socket sock, uint64_t peerPos) {
  if (!failoverOn() || s < 0 || s >= stripe.nsocks || rail < 0 || rail >= nrails_) return ncclInvalidUsage;
  holdBoth(s);
  const uint64_t myPos = in.cursor[s].load(std::memory_order_relaxed);
  ncclResult_t res = net::sendAll(sock, &myPos, sizeof(myPos), peer.describe().c_str(), nullptr,
                                  static_cast<int>(param::railTimeoutMsec()));
  const bool wasLost = lostSocket(s);
  if (res == ncclSuccess) {
    if (!swapSocket(s, rail, std::move(sock), peerPos, wasLost ? "the peer replaced it" : "the peer moved it back"))
      res = ncclInternalError;
  }
  releaseBoth(s);
  if (wakeHelpers_) wakeHelpers_();
  ringDoorbell(bell);
  return res;
}

int SocketLink::tendRail(const std::vector<int>& sockets) {
  if (away_.load(std::memory_order_acquire) == 0) return -1;
  int waitMs = -1;
  auto within = [&](int64_t ms) { waitMs = waitMs < 0 ? static_cast<int>(ms) : std::min<int>(waitMs, static_cast<int>(ms)); };
  // Short: a rail that answers connects within milliseconds, and with every rail down the
  // ranks must still fail within 10 s (ACCL_RAIL_TIMEOUT plus one try per rail).
  const int connectMs = static_cast<int>(std::min<int64_t>(param::socketConnectTimeoutMsec(), 1000));
  const int64_t railMs = param::railTimeoutMsec();
  for (int s : sockets) {
    if (stopping.load() || error.load() != 0) return -1;
    if (lostSocket(s)) {
      if (!redial_.connect) {
        if (redial_.notify && !notified_[s].exchange(true)) {
          // Tell the peer at once, on another rail: it may not see the loss for a while.
          const int lost = railNow(s);
          for (int step = 1; step < nrails_; step++)
            if (redial_.notify((lost + step) % nrails_, s, lost) == ncclSuccess) break;
        }
        // The peer connects again; it sees the loss within about the rail timeout too.
        // The peer may see an idle socket die only by keepalive, a little after us.
        const int64_t waitMs = 2 * railMs + connectMs;
        const int64_t left = lostAtMs_[s].load() + waitMs - nowMs();
        if (left <= 0) {
          fail(ncclRemoteError,
               "rail " + peer.ifnameOfRail(railNow(s)) + " lost and the peer did not come back on another rail within " +
                   std::to_string(waitMs) + " ms",
               -1);
          return -1;
        }
        within(std::min<int64_t>(left, 100));
        continue;
      }
      bool moved = false;
      for (int step = 1; step <= nrails_ && !moved; step++) {
        const int rail = (railNow(s) + step) % nrails_;  // the failed rail itself last
        moved = resumeOn(s, rail, connectMs, "its rail failed");
      }
      if (!moved) {
        std::string rails;
        for (int r = 0; r < nrails_; r++) rails += (r ? ", " : "") + peer.ifnameOfRail(r);
        fail(ncclRemoteError, "every rail (" + rails + ") is lost or does not answer", -1);
        return -1;
      }
    } else if (redial_.connect && railNow(s) != homeRail(s)) {
      const int64_t retryMs = std::max<int64_t>(param::railRetrySec(), 1) * 1000;
      const int64_t left = movedAtMs_[s].load() + retryMs - nowMs();
      if (left > 0) {
        within(left);
        continue;
      }
      if (!resumeOn(s, homeRail(s), 500, "its own rail answers again")) {
        movedAtMs_[s].store(nowMs());
        within(retryMs);
      }
    }
  }
  return waitMs;
}

}  // namespace accl
