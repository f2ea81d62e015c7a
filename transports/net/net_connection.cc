// net_connection.cc: slots, the executor's ring calls, and the worker that drives the module.
#include "transports/net/net_connection.h"
#include <cstdio>
#include <sched.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>
#include "base/check.h"

namespace accl::net {
namespace {

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

// One direction's memory: kNetSlots slots of slotBytes, registered with the module.
struct SlotRing {
  explicit SlotRing(size_t ringBytes)
      : slotBytes(ringBytes / kNetSlots),
        buf(static_cast<char*>(std::aligned_alloc(4096, (ringBytes + 4095) / 4096 * 4096))) {}
  size_t slotBytes;
  std::unique_ptr<char, FreeDeleter> buf;
  void* mhandle = nullptr;
  std::atomic<size_t> sizes[kNetSlots] = {};  // bytes in each slot (message size)
  void* requests[kNetSlots] = {};             // worker only
  char* slot(uint64_t seq) { return buf.get() + (seq % kNetSlots) * slotBytes; }
};

}  // namespace

class NetConnection;

class NetWorker {
 public:
  NetWorker(Doorbell* bell, int rank, const topo::CpuMask& cpus)
      : bell_(bell), rank_(rank), thread_([this, cpus] {
          cpus.applyToCurrentThread();
          run();
        }) {}
  ~NetWorker() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void add(NetConnection* c) {
    std::lock_guard<std::mutex> lk(mu_);
    conns_.push_back(c);
  }
  // After this returns the worker never touches `c` again.
  void remove(NetConnection* c) {
    std::lock_guard<std::mutex> lk(mu_);
    conns_.erase(std::remove(conns_.begin(), conns_.end(), c), conns_.end());
  }
  // Executor side: new data to send or new space to receive into.
  void wake() {
    if (sleeping_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lk(mu_);
      cv_.notify_one();
    }
  }
  Doorbell* bell() const { return bell_; }
  int rank() const { return rank_; }

 private:
  void run();
  Doorbell* bell_;
  int rank_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<NetConnection*> conns_;
  bool stop_ = false;
  std::atomic<bool> sleeping_{false};
  std::thread thread_;
};

class NetConnection final : public PeerConnection {
 public:
  NetConnection(std::shared_ptr<NetWorker> worker, NetModule* module, void* sendComm, void* recvComm,
                size_t ringBytes, std::string peer)
      : worker_(std::move(worker)), module_(module), sendComm_(sendComm), recvComm_(recvComm), out_(ringBytes),
        in_(ringBytes), peer_(std::move(peer)), send_(this), recv_(this) {}
  ~NetConnection() override {
    detach();
    if (out_.mhandle) module_->deregMr(sendComm_, out_.mhandle);
    if (in_.mhandle) module_->deregMr(recvComm_, in_.mhandle);
    module_->closeSend(sendComm_);
    module_->closeRecv(recvComm_);
  }
  ncclResult_t registerRings(size_t ringBytes) {
    if (!out_.buf || !in_.buf) {
      WARN("rank %d: cannot allocate %zu bytes of net staging memory for %s", worker_->rank(), 2 * ringBytes,
           peer_.c_str());
      return ncclSystemError;
    }
    ncclResult_t res = module_->regMr(sendComm_, out_.buf.get(), ringBytes, kPtrHost, &out_.mhandle);
    if (res == ncclSuccess) res = module_->regMr(recvComm_, in_.buf.get(), ringBytes, kPtrHost, &in_.mhandle);
    if (res != ncclSuccess) {
      WARN("rank %d: net module %s cannot register %zu bytes of host memory for %s (error %d)", worker_->rank(),
           module_->name(), ringBytes, peer_.c_str(), static_cast<int>(res));
      return res;
    }
    worker_->add(this);
    attached_ = true;
    return ncclSuccess;
  }

  SendChannel* send() override { return &send_; }
  RecvChannel* recv() override { return &recv_; }
  void close(int) override {
    closedLocally_.store(true);
    detach();
  }
  const char* transportName() const override { return module_->name(); }

  // Worker thread: post what can be posted, collect completions. True if anything moved.
  bool pump();

  // Executor side. A module error is reported only where the executor needs this connection
  // (to send, or data that has not come): a peer that destroyed its communicator after its
  // last operation leaves an EOF behind that matters to nobody.
  ncclResult_t failure() const {
    if (closedLocally_.load(std::memory_order_relaxed)) {
      WARN("rank %d: %s connection to %s was closed (communicator aborted)", worker_->rank(), module_->name(),
           peer_.c_str());
      return ncclRemoteError;
    }
    int err = error_.load(std::memory_order_acquire);
    if (err != 0 && !reported_.exchange(true))
      WARN("rank %d: net module %s failed on the connection to %s: %s (peer died, link down or plugin error)",
           worker_->rank(), module_->name(), peer_.c_str(), errorText_.c_str());
    return static_cast<ncclResult_t>(err);
  }
  ncclResult_t aborted() const { return closedLocally_.load(std::memory_order_relaxed) ? failure() : ncclSuccess; }
  bool broken() const { return error_.load(std::memory_order_acquire) != 0; }

  class Send final : public SendChannel {
   public:
    explicit Send(NetConnection* c) : c_(c) {}
    ncclResult_t acquire(void** buf, size_t* avail) override {
      NCCLCHECK(c_->failure());
      bool full = fill_ - c_->sendDone_.load(std::memory_order_acquire) >= kNetSlots;
      *buf = c_->out_.slot(fill_);
      *avail = full ? 0 : c_->out_.slotBytes;
      return ncclSuccess;
    }
    void commit(size_t n) override {
      // Nothing to send is no message: a receiver takes a 0-byte message for a broken module
      // (the realignment after a mismatched call commits what is left of a slot, maybe nothing).
      if (n == 0) return;
      c_->out_.sizes[fill_ % kNetSlots].store(n, std::memory_order_relaxed);
      fill_++;
      position_ += n;
      c_->sendReady_.store(fill_, std::memory_order_seq_cst);
      c_->worker_->wake();
    }
    ncclResult_t progress() override { return c_->aborted(); }
    // Unsent slots of a broken connection never leave: nothing to wait for.
    bool pendingLocal() const override {
      return c_->sendDone_.load(std::memory_order_acquire) != fill_ && !c_->broken();
    }
    uint64_t position() const override { return position_; }

   private:
    NetConnection* c_;
    uint64_t fill_ = 0;  // slot being filled (sequence number)
    uint64_t position_ = 0;
  };

  class Recv final : public RecvChannel {
   public:
    explicit Recv(NetConnection* c) : c_(c) {}
    ncclResult_t peek(const void** buf, size_t* avail) override {
      *buf = c_->in_.slot(read_) + offset_;
      if (read_ == c_->recvArrived_.load(std::memory_order_acquire)) {
        *avail = 0;
        return c_->failure();
      }
      *avail = c_->in_.sizes[read_ % kNetSlots].load(std::memory_order_relaxed) - offset_;
      return ncclSuccess;
    }
    void release(size_t n) override {
      offset_ += n;
      position_ += n;
      if (offset_ == c_->in_.sizes[read_ % kNetSlots].load(std::memory_order_relaxed)) {
        read_++;
        offset_ = 0;
        c_->recvConsumed_.store(read_, std::memory_order_seq_cst);
        c_->worker_->wake();
      }
    }
    ncclResult_t progress() override { return c_->aborted(); }
    uint64_t position() const override { return position_; }

   private:
    NetConnection* c_;
    uint64_t read_ = 0;
    size_t offset_ = 0;
    uint64_t position_ = 0;
  };

 private:
  void detach() {
    if (attached_) worker_->remove(this);
    attached_ = false;
  }
  // Worker side: remembers the first failure; failure() reports it where it matters.
  void fail(ncclResult_t res, std::string what) {
    if (error_.load() == 0) {
      errorText_ = std::move(what);
      error_.store(res == ncclSuccess ? ncclSystemError : res, std::memory_order_release);
    }
  }

  std::shared_ptr<NetWorker> worker_;
  NetModule* module_;
  void* sendComm_;
  void* recvComm_;
  SlotRing out_;
  SlotRing in_;
  std::string peer_;
  bool attached_ = false;
  std::atomic<bool> closedLocally_{false};
  std::atomic<int> error_{0};
  std::string errorText_;  // written before error_ is published
  mutable std::atomic<bool> reported_{false};

  // Send direction: executor publishes sendReady_ (slots closed), worker publishes sendDone_.
  std::atomic<uint64_t> sendReady_{0};
  std::atomic<uint64_t> sendDone_{0};
  uint64_t sendPosted_ = 0;  // worker only
  // Receive direction: executor publishes recvConsumed_, worker publishes recvArrived_.
  std::atomic<uint64_t> recvConsumed_{0};
  std::atomic<uint64_t> recvArrived_{0};
  uint64_t recvPosted_ = 0;  // worker only

  Send send_;
  Recv recv_;
};

bool NetConnection::pump() {
  if (error_.load(std::memory_order_relaxed) != 0) return false;
  bool moved = false;
  ncclResult_t res;
  const uint64_t ready = sendReady_.load(std::memory_order_acquire);
  while (sendPosted_ < ready) {
    void* req = nullptr;
    uint64_t seq = sendPosted_;
    res = module_->isend(sendComm_, out_.slot(seq), out_.sizes[seq % kNetSlots].load(std::memory_order_relaxed), 0,
                         out_.mhandle, &req);
    if (res != ncclSuccess) return fail(res, "isend returned " + std::to_string(res)), true;
    if (!req) break;
    out_.requests[seq % kNetSlots] = req;
    sendPosted_++;
  }
  for (uint64_t done = sendDone_.load(std::memory_order_relaxed); done < sendPosted_; done++) {
    int isDone = 0;
    size_t size = 0;
    res = module_->test(out_.requests[done % kNetSlots], &isDone, &size);
    if (res != ncclSuccess) return fail(res, "test (send) returned " + std::to_string(res)), true;
    if (!isDone) break;
    sendDone_.store(done + 1, std::memory_order_seq_cst);
    moved = true;
  }
  const uint64_t limit = recvConsumed_.load(std::memory_order_acquire) + kNetSlots;
  while (recvPosted_ < limit) {
    void* req = nullptr;
    res = module_->irecv(recvComm_, in_.slot(recvPosted_), in_.slotBytes, 0, in_.mhandle, &req);
    if (res != ncclSuccess) return fail(res, "irecv returned " + std::to_string(res)), true;
    if (!req) break;
    in_.requests[recvPosted_ % kNetSlots] = req;
    recvPosted_++;
  }
  for (uint64_t arrived = recvArrived_.load(std::memory_order_relaxed); arrived < recvPosted_; arrived++) {
    int isDone = 0;
    size_t size = 0;
    res = module_->test(in_.requests[arrived % kNetSlots], &isDone, &size);
    if (res != ncclSuccess) return fail(res, "test (receive) returned " + std::to_string(res)), true;
    if (!isDone) break;
    if (size == 0 || size > in_.slotBytes) {
      fail(ncclSystemError, "it delivered a " + std::to_string(size) + "-byte message into a " +
                                std::to_string(in_.slotBytes) + "-byte slot");
      return true;
    }
    in_.sizes[arrived % kNetSlots].store(size, std::memory_order_relaxed);
    recvArrived_.store(arrived + 1, std::memory_order_seq_cst);
    moved = true;
  }
  return moved;
}

void NetWorker::run() {
  using Clock = std::chrono::steady_clock;
  auto lastMove = Clock::now();
  std::chrono::microseconds backoff(20);
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    bool moved = false;
    for (NetConnection* c : conns_) moved = c->pump() || moved;
    if (moved) {
      ringDoorbell(bell_);
      lastMove = Clock::now();
      backoff = std::chrono::microseconds(20);
      continue;
    }
    // Modules progress only when tested: keep testing (yielding the core) while traffic is
    // recent, then back off to at most 1 ms between polls; the executor's wake() cuts a
    // sleep short when it has something to send or has freed receive space.
    if (Clock::now() - lastMove < std::chrono::microseconds(500)) {
      lk.unlock();
      sched_yield();
      lk.lock();
      continue;
    }
    sleeping_.store(true, std::memory_order_seq_cst);
    // A commit/release published before `sleeping_` was visible sent no notify: look again.
    bool late = false;
    for (NetConnection* c : conns_) late = c->pump() || late;
    if (late) {
      sleeping_.store(false, std::memory_order_relaxed);
      ringDoorbell(bell_);
      lastMove = Clock::now();
      continue;
    }
    cv_.wait_for(lk, backoff);
    sleeping_.store(false, std::memory_order_relaxed);
    backoff = std::min<std::chrono::microseconds>(backoff * 2, std::chrono::microseconds(1000));
  }
}

std::shared_ptr<NetWorker> makeNetWorker(Doorbell* bell, int rank, const topo::CpuMask& cpus) {
  return std::make_shared<NetWorker>(bell, rank, cpus);
}

ncclResult_t makeNetConnection(const std::shared_ptr<NetWorker>& worker, NetModule* module, void* sendComm,
                               void* recvComm, size_t ringBytes, std::string peer,
                               std::unique_ptr<PeerConnection>* out) {
  auto conn = std::make_unique<NetConnection>(worker, module, sendComm, recvComm, ringBytes, std::move(peer));
  NCCLCHECK(conn->registerRings(ringBytes));
  *out = std::move(conn);
  return ncclSuccess;
}

}  // namespace accl::net
