// socket_worker.cc: the helper thread's loop: move what can move without blocking, publish the
// new ring ends, ring the owner's doorbell; when nothing moves, sleep in poll().
#include "transports/socket/socket_worker.h"
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include "nccl.h"

namespace accl {

SocketWorker::SocketWorker(SocketLink* link, std::vector<int> sockets, const topo::CpuMask& cpus)
    : link_(link), sockets_(std::move(sockets)), eventFd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::thread([this] { run(); });
  // Placed by its creator, not by itself: with small messages moved by the executor, the
  // thread may not get a core before the first operations are over.
  cpus.applyToThread(thread_.native_handle());
}

SocketWorker::~SocketWorker() {
  join();
  if (eventFd_ >= 0) close(eventFd_);
}

void SocketWorker::signal() {
  uint64_t one = 1;
  ssize_t n = write(eventFd_, &one, sizeof(one));
  (void)n;  // a full counter already means "wake up"
}

void SocketWorker::wake() {
  // Pairs with sleepUntilReady(): either it sees our ring update or we see it sleeping.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) signal();
}

void SocketWorker::ownerFellAsleep() {
  // Pairs with sleepUntilReady(): either it sees ownerAsleep or we see it deaf and asleep.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst) && deafToArrivals_.load(std::memory_order_seq_cst)) signal();
}

void SocketWorker::join() {
  if (!thread_.joinable()) return;
  signal();
  thread_.join();
}

void SocketWorker::sleepUntilReady(int timeoutMs) {
  sleeping_.store(true, std::memory_order_seq_cst);
  std::vector<pollfd> fds;
  std::vector<uint32_t> gens;  // per socket: its generation when polled
  fds.reserve(sockets_.size() + 1);
  gens.reserve(sockets_.size());
  fds.push_back({eventFd_, POLLIN, 0});
  // Arrivals on an idle link are the executor's to read while it is awake (it reads the
  // socket when its ring is empty): waking this thread for each small message as well cost a
  // thread switch per hop. Watch them when the executor sleeps, and while sending (both ends
  // of a bidirectional stream may be sending, and only helpers read then).
  // Deaf first, then look: an executor falling asleep after the look sees us deaf and wakes us.
  deafToArrivals_.store(true, std::memory_order_seq_cst);
  bool sending = false;
  for (int s : sockets_)
    sending = sending || link_->out.ring.tail.load(std::memory_order_seq_cst) > link_->out.cursor[s].load(std::memory_order_relaxed);
  const bool listen = sending || link_->ownerAsleep.load(std::memory_order_seq_cst);
  if (listen) deafToArrivals_.store(false, std::memory_order_seq_cst);
  for (int s : sockets_) {
    short events = 0;
    uint64_t sendPos = link_->out.cursor[s].load(std::memory_order_relaxed);
    if (link_->out.ring.tail.load(std::memory_order_seq_cst) > sendPos) events |= POLLOUT;
    uint64_t recvPos = link_->in.cursor[s].load(std::memory_order_relaxed);
    if (listen && !link_->eof[s].load() &&
        link_->in.ring.head.load(std::memory_order_seq_cst) + link_->in.ring.cap > recvPos)
      events |= POLLIN;
    // A socket with nothing to watch stays out of the poll set, closed by the peer or not (a
    // closed one reports POLLHUP forever). Registered, even for errors only, it made every
    // arrival the executor reads itself walk this thread's wait entry (+0.3 us per 8-byte
    // all-reduce at np2). A reset on an idle socket is then met by whoever reads it next, as
    // an EOF (pumpRecv), or by this thread once it sends or listens on it again.
    // With several rails every live socket is watched for errors (events 0 still reports
    // POLLERR): bytes handed to the kernel but never acknowledged, or keepalives unanswered on
    // an idle socket, must lose it here, or the peer would wait for a stripe nobody resends.
    const bool failover = link_->failoverOn();
    const bool watched = (events != 0 || failover) && !link_->lostSocket(s) && !(failover && link_->eof[s].load());
    // The generation before the descriptor: a swap in between shows as a changed generation.
    gens.push_back(link_->socketGeneration(s));
    fds.push_back({watched ? link_->socks[s].fd() : -1, events, 0});
  }
  if (!link_->stopping.load(std::memory_order_seq_cst)) {
    int n = poll(fds.data(), fds.size(), timeoutMs);
    if (n > 0) {
      for (size_t i = 1; i < fds.size(); i++)
        if (fds[i].revents != 0)
          link_->onPollEvents(sockets_[i - 1], gens[i - 1], fds[i].fd, fds[i].events, fds[i].revents);
    }
  }
  sleeping_.store(false, std::memory_order_relaxed);
  uint64_t drained;
  ssize_t r = read(eventFd_, &drained, sizeof(drained));
  (void)r;
}

void SocketWorker::run() {
  while (!link_->stopping.load(std::memory_order_acquire) && link_->error.load(std::memory_order_acquire) == 0) {
    // With several rails: lose sockets whose local interface went down, replace lost sockets,
    // move sockets back to a rail that answers again; and look at the interfaces again soon.
    int waitMs = -1;
    if (link_->failoverOn()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= nextInterfaceCheck_) {
        link_->loseSocketsOnDownInterfaces(sockets_);
        nextInterfaceCheck_ = now + std::chrono::milliseconds(kInterfaceCheckMs);
      }
      waitMs = link_->tendRail(sockets_);
      waitMs = waitMs < 0 ? kInterfaceCheckMs : std::min(waitMs, kInterfaceCheckMs);
    }
    bool sent = false;
    bool received = false;
    for (int s : sockets_) {
      sent |= link_->pumpSend(s);
      received |= link_->pumpRecv(s);
    }
    if (sent) link_->out.publishMin(link_->out.ring.head);
    if (received) link_->in.publishMin(link_->in.ring.tail);
    if (sent || received) {
      ringDoorbell(link_->bell);
      continue;
    }
    sleepUntilReady(waitMs);
  }
}

}  // namespace accl
