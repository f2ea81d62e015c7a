// socket_transport.cc: the executor's side of a striped socket connection. acquire/commit and
// peek/release work on the staging rings; the helper threads (socket_worker.cc) move the bulk
// of the bytes, but small commits are sent, and awaited bytes read, by the executor itself.
#include "transports/socket/socket_transport.h"
#include <atomic>
#include <algorithm>
#include <mutex>
#include "base/check.h"
#include "base/param.h"
#include "transports/socket/socket_worker.h"

namespace accl {
namespace {

// Most of the ring stays in flight while each socket still gets whole chunks.
// Commits up to this size are sent by the committing thread itself (one send() each), larger
// ones by the helper threads, so the executor keeps reducing while they stream.
constexpr size_t kInlineSendBytes = 16 << 10;

size_t chunkBytes(size_t ringBytes, int nsocks) {
  size_t chunk = ringBytes / (4 * static_cast<size_t>(nsocks));
  chunk = std::clamp<size_t>(chunk, 4 << 10, 512 << 10);
  size_t pow2 = 4 << 10;
  while (pow2 * 2 <= chunk) pow2 *= 2;
  return std::min(pow2, ringBytes);
}

class StripedConnection;

class SocketSend final : public SendChannel {
 public:
  explicit SocketSend(StripedConnection* conn) : conn_(conn) {}
  ncclResult_t acquire(void** buf, size_t* avail) override;
  void commit(size_t n) override;
  void commitPadding(size_t n) override;
  ncclResult_t progress() override;
  bool pendingLocal() const override;
  uint64_t position() const override;
  bool lend(const void* src, size_t n) override;
  bool lends() const override { return true; }
  bool lendable(const void* src) const override;
  uint64_t handedOff() const override;

 private:
  StripedConnection* conn_;
};

class SocketRecv final : public RecvChannel {
 public:
  explicit SocketRecv(StripedConnection* conn) : conn_(conn) {}
  ncclResult_t peek(const void** buf, size_t* avail) override { return peekAt(buf, avail, true); }
  ncclResult_t peekQuietly(const void** buf, size_t* avail) override { return peekAt(buf, avail, false); }
  void release(size_t n) override;
  ncclResult_t progress() override;
  uint64_t position() const override;

 private:
  ncclResult_t peekAt(const void** buf, size_t* avail, bool warnOnClose);
  StripedConnection* conn_;
};

class StripedConnection final : public SocketConnection {
 public:
  StripedConnection(size_t ringBytes, const SocketLayout& layout, Doorbell* bell, SocketPeer peer,
                    const topo::CpuMask& cpus)
      : link_(std::vector<net::Socket>(static_cast<size_t>(layout.nsocks())), ringBytes,
              Stripe{chunkBytes(ringBytes, layout.nsocks()), layout.nsocks()}, bell, std::move(peer)),
        layout_(layout),
        cpus_(cpus),
        send_(this),
        recv_(this) {}
  ~StripedConnection() override {
    stop();
    workers_.clear();  // joins before the link (rings, sockets) goes away
  }
  void attach(std::vector<net::Socket> socks) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (link_.closedLocally.load() || attached_.load()) {
      for (auto& s : socks) s.shutdownBoth();
      return;
    }
    link_.socks = std::move(socks);
    if (layout_.nrails > 1) {
      link_.enableFailover(layout_.nrails, layout_.perRail(), redial_, [this] {
        if (attached())
          for (auto& w : workers_) w->wake();
      });
    }
    // NCCL_SOCKET_NTHREADS helper threads per rail, each on sockets of that rail only.
    for (int r = 0; r < layout_.nrails; r++) {
      for (int t = 0; t < layout_.nthreads; t++) {
        std::vector<int> mine;
        for (int s = t; s < layout_.perRail(); s += layout_.nthreads) mine.push_back(r * layout_.perRail() + s);
        workers_.push_back(std::make_unique<SocketWorker>(&link_, std::move(mine), cpus_));
      }
    }
    attached_.store(true, std::memory_order_seq_cst);
    // A commit or release made while the workers were being started saw attached_ false and
    // woke nobody; a worker that had already moved everything before it and gone to sleep
    // would sleep forever. Whichever of that and this store came first, one of them wakes it.
    for (auto& w : workers_) w->wake();
    ringDoorbell(link_.bell);  // data may already wait in the staging rings
  }
  void setRedial(SocketLink::Redial redial) override { redial_ = std::move(redial); }
  ncclResult_t acceptResume(int s, int rail, net::Socket sock, uint64_t peerPos) override {
    if (!attached()) return ncclInvalidUsage;
    return link_.acceptResume(s, rail, std::move(sock), peerPos);
  }
  void peerLost(int s, int rail) override {
    if (attached()) link_.peerLost(s, rail);
  }
  SendChannel* send() override { return &send_; }
  RecvChannel* recv() override { return &recv_; }
  void close(int /*culprit: sockets cannot pass it on; the bootstrap notice does*/) override {
    link_.closedLocally.store(true);
    stop();
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& s : link_.socks) s.shutdownBoth();
  }
  const char* transportName() const override { return "Socket"; }
  int closedByPeer() const override {
    if (link_.closedLocally.load()) return -1;
    // A reset seen by the helper thread's poll() fails the link before any recv() sees EOF.
    if (link_.endedByPeer.load(std::memory_order_acquire)) return link_.peer.rank;
    for (int s = 0; s < link_.stripe.nsocks; s++)
      if (link_.eof[s].load(std::memory_order_acquire) && !link_.lostSocket(s)) return link_.peer.rank;
    return -1;
  }

  void ownerSleeps(bool asleep) override {
    link_.ownerAsleep.store(asleep, std::memory_order_seq_cst);
    // Workers attached later read ownerAsleep themselves before they first sleep.
    if (asleep && attached())
      for (auto& w : workers_) w->ownerFellAsleep();
  }

  SocketLink& link() { return link_; }
  // The sockets are in place (acquire: link_.socks is then safe to use from this thread).
  bool attached() const { return attached_.load(std::memory_order_acquire); }
  void wakeWorkers() {
    // Before attach there is nobody to wake: the workers' first pass moves what is waiting,
    // and attach() wakes them after it. The fence keeps our ring update (a release store)
    // ahead of this load; without it the load may pass the store, and this side could read
    // "not attached" while the workers attach() wakes still miss the update.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!attached_.load(std::memory_order_seq_cst)) return;
    for (auto& w : workers_) w->wake();
  }
  // The failure the executor should see, WARNed where it is first noticed.
  ncclResult_t failure() const {
    if (link_.closedLocally.load(std::memory_order_relaxed)) {
      WARN("rank %d: socket connection to %s was closed (communicator aborted)", link_.peer.myRank,
           link_.peer.describe().c_str());
      return ncclRemoteError;
    }
    int err = link_.error.load(std::memory_order_acquire);
    return static_cast<ncclResult_t>(err);
  }

 private:
  void stop() {
    std::lock_guard<std::mutex> lk(mu_);
    link_.stopping.store(true, std::memory_order_seq_cst);
    for (auto& w : workers_) w->join();
  }

  SocketLink link_;
  const SocketLayout layout_;
  const topo::CpuMask cpus_;
  SocketSend send_;
  SocketRecv recv_;
  std::mutex mu_;  // attach against close/stop
  std::atomic<bool> attached_{false};
  SocketLink::Redial redial_;
  std::vector<std::unique_ptr<SocketWorker>> workers_;  // written once, in attach
};

ncclResult_t SocketSend::acquire(void** buf, size_t* avail) {
  NCCLCHECK(conn_->failure());
  StreamDir& out = conn_->link().out;
  StagingRing& ring = out.ring;
  uint64_t tail = ring.tail.load(std::memory_order_relaxed);
  uint64_t head = ring.head.load(std::memory_order_acquire);
  *buf = ring.at(tail);
  if (head < out.span.end.load(std::memory_order_relaxed)) {
    *avail = 0;  // a lent span is still being sent: its stream bytes are not in the ring
    return ncclSuccess;
  }
  size_t used = static_cast<size_t>(tail - head);
  size_t off = tail & (ring.cap - 1);
  *avail = std::min(ring.cap - used, ring.cap - off);
  return ncclSuccess;
}

bool SocketSend::lendable(const void* src) const {
  const StreamDir& out = conn_->link().out;
  const UserSpan& span = out.span;
  const uint64_t end = span.end.load(std::memory_order_relaxed);
  // Every socket is past the previous span: a new one may start at the tail (after whatever
  // the ring still holds). Otherwise only the bytes right after the span's extend it.
  if (out.ring.head.load(std::memory_order_acquire) >= end) return true;
  return end == out.ring.tail.load(std::memory_order_relaxed) &&
         span.base.load(std::memory_order_relaxed) + (end - span.start.load(std::memory_order_relaxed)) == src;
}

bool SocketSend::lend(const void* src, size_t n) {
  StreamDir& out = conn_->link().out;
  UserSpan& span = out.span;
  const uint64_t tail = out.ring.tail.load(std::memory_order_relaxed);
  const char* from = static_cast<const char*>(src);
  if (out.ring.head.load(std::memory_order_acquire) >= span.end.load(std::memory_order_relaxed)) {
    span.base.store(from, std::memory_order_relaxed);
    span.start.store(tail, std::memory_order_relaxed);
  } else if (!lendable(src)) {
    return false;
  }
  span.end.store(tail + n, std::memory_order_release);
  out.ring.tail.store(tail + n, std::memory_order_seq_cst);
  conn_->wakeWorkers();
  return true;
}

uint64_t SocketSend::handedOff() const { return conn_->link().out.ring.head.load(std::memory_order_acquire); }

void SocketSend::commit(size_t n) {
  SocketLink& link = conn_->link();
  StagingRing& ring = link.out.ring;
  const uint64_t tail = ring.tail.load(std::memory_order_relaxed) + n;
  ring.tail.store(tail, std::memory_order_seq_cst);
  if (n <= kInlineSendBytes && conn_->attached()) {
    // Small: send it now from this thread. Waking the helper thread instead costs a syscall
    // plus a 20-30 us thread wake-up on a small VM, more than the whole transfer.
    bool sent = false;
    for (int s = 0; s < link.stripe.nsocks; s++)
      if (link.out.cursor[s].load(std::memory_order_relaxed) < tail) sent |= link.pumpSend(s);
    if (sent) link.out.publishMin(ring.head);
    if (ring.head.load(std::memory_order_acquire) >= tail) return;  // all of it is on the wire
  }
  conn_->wakeWorkers();
}

void SocketSend::commitPadding(size_t n) {
  // Staged only: the data commit right after it sends both in one send() (or wakes a helper).
  StagingRing& ring = conn_->link().out.ring;
  ring.tail.store(ring.tail.load(std::memory_order_relaxed) + n, std::memory_order_seq_cst);
}

ncclResult_t SocketSend::progress() { return conn_->failure(); }

bool SocketSend::pendingLocal() const {
  const StagingRing& ring = conn_->link().out.ring;
  return ring.head.load(std::memory_order_acquire) != ring.tail.load(std::memory_order_relaxed);
}

uint64_t SocketSend::position() const { return conn_->link().out.ring.tail.load(std::memory_order_relaxed); }

ncclResult_t SocketRecv::peekAt(const void** buf, size_t* avail, bool warnOnClose) {
  SocketLink& link = conn_->link();
  StagingRing& ring = link.in.ring;
  uint64_t head = ring.head.load(std::memory_order_relaxed);
  size_t used = static_cast<size_t>(ring.tail.load(std::memory_order_acquire) - head);
  size_t off = head & (ring.cap - 1);
  *buf = ring.at(head);
  *avail = std::min(used, ring.cap - off);
  if (*avail == 0 && conn_->attached() && link.pumpRecv(link.stripe.socketOf(head))) {
    // Nothing staged: read the socket that carries the next byte ourselves rather than wait
    // for the helper thread to wake up, read it and ring our doorbell.
    link.in.publishMin(ring.tail);
    used = static_cast<size_t>(ring.tail.load(std::memory_order_acquire) - head);
    *avail = std::min(used, ring.cap - off);
  }
  if (*avail == 0) {
    NCCLCHECK(conn_->failure());
    if (link.blockedOnEof(head)) {
      if (!warnOnClose) return ncclRemoteError;
      WARN("rank %d: socket connection from %s closed before the expected data arrived (it destroyed its "
           "communicator, exited, died or aborted)",
           link.peer.myRank, link.peer.describe().c_str());
      return ncclRemoteError;
    }
  }
  return ncclSuccess;
}

void SocketRecv::release(size_t n) {
  SocketLink& link = conn_->link();
  StagingRing& ring = link.in.ring;
  const uint64_t oldHead = ring.head.load(std::memory_order_relaxed);
  ring.head.store(oldHead + n, std::memory_order_seq_cst);
  // A sleeping helper stops reading a socket only when the ring had no room for it (cursor
  // at head + cap, see SocketWorker::sleepUntilReady); it read head no later than our last
  // release, so only then does the new room need a wake-up (a syscall and a thread switch).
  bool wasFull = false;
  for (int s = 0; s < link.stripe.nsocks; s++)
    wasFull = wasFull || link.in.cursor[s].load(std::memory_order_relaxed) >= oldHead + ring.cap;
  if (wasFull) conn_->wakeWorkers();
}

ncclResult_t SocketRecv::progress() { return conn_->failure(); }

uint64_t SocketRecv::position() const { return conn_->link().in.ring.head.load(std::memory_order_relaxed); }

}  // namespace

SocketLayout socketLayout() {
  SocketLayout layout;
  int64_t threads = param::socketNthreads();
  int64_t socks = param::nsocksPerThread();
  // Automatic: two sockets on one helper thread. One thread keeps a 2-core host from being
  // oversubscribed; two sockets keep the link busy while one waits for its window.
  layout.nthreads = static_cast<int>(threads > 0 ? std::min<int64_t>(threads, 16) : 1);
  layout.nsocksPerThread = static_cast<int>(socks > 0 ? std::min<int64_t>(socks, 16) : 2);
  while (layout.nsocks() > 64) layout.nsocksPerThread--;  // NCCL's cap on sockets per peer
  return layout;
}

std::unique_ptr<SocketConnection> makeSocketConnection(size_t ringBytes, const SocketLayout& layout, Doorbell* bell,
                                                       SocketPeer peer, const topo::CpuMask& cpus) {
  return std::make_unique<StripedConnection>(ringBytes, layout, bell, std::move(peer), cpus);
}

}  // namespace accl
