#include "comm/net_proxy.h"
#include <algorithm>
#include <cstring>
#include "base/check.h"
#include "base/log.h"
#include "comm/comm.h"
#include "transports/transport.h"

namespace accl {
namespace {

constexpr uint32_t kFrameMagic = 0x4143504bu;   // "ACPK"
constexpr uint32_t kNoticeMagic = 0x4143504eu;  // "ACPN": which call the sender's kernel is in
// How long nothing has to move before a waiting kernel's call is announced to the peer it waits
// for: far above the gaps of a flowing call, far below a user's patience.
constexpr auto kNoticeAfter = std::chrono::milliseconds(20);
// After this long without anything to move the thread sleeps between passes, longer each time
// up to kMaxNap, until a launch wakes it (a replayed graph's chunks wait at most kMaxNap).
constexpr auto kSpinFor = std::chrono::microseconds(200);
constexpr auto kMaxNap = std::chrono::microseconds(1000);

uint64_t loadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void storeRelease(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// The kernels' call seqlocks (kern::ProxyHeader::callWord/call): word 0 while the stamp is
// being written, else its call number + 1.
bool readCall(const uint64_t* wordAt, const kern::KStamp* at, uint64_t* word, kern::KStamp* out) {
  *word = loadAcquire(wordAt);
  if (*word == 0) return false;
  std::memcpy(out, const_cast<const kern::KStamp*>(at), sizeof(*out));
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return loadAcquire(wordAt) == *word;
}
void publishCall(uint64_t* wordAt, kern::KStamp* at, const kern::KStamp& s) {
  storeRelease(wordAt, 0);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  std::memcpy(at, &s, sizeof(s));
  storeRelease(wordAt, static_cast<uint64_t>(s.seq) + 1);
}

}  // namespace

NetProxy::NetProxy(Comm* c, char* box, std::vector<int> peers)
    : c_(c), box_(box), header_(reinterpret_cast<kern::ProxyHeader*>(box)) {
  for (int r : peers) {
    Peer p;
    p.rank = r;
    peers_.push_back(p);
  }
}

NetProxy::~NetProxy() { stop(); }

void NetProxy::stop() {
  stop_ = true;
  {
    std::lock_guard<std::mutex> lk(mu_);
    wakes_++;
  }
  wakeCv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ncclResult_t NetProxy::start() {
  for (Peer& p : peers_) NCCLCHECK(c_->connection(p.rank, &p.conn));
  thread_ = std::thread([this] { run(); });
  return ncclSuccess;
}

void NetProxy::wake() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    wakes_++;
  }
  wakeCv_.notify_one();
}

bool NetProxy::drain(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  // A pass that starts after this call and finds nothing left to send.
  const uint64_t after = passes_.load() + 1;
  wake();
  while (std::chrono::steady_clock::now() < deadline) {
    if (dead_.load() || c_->asyncError.load() != ncclSuccess || c_->abortFlag.load()) return false;
    if (quietPass_.load() > after) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    wake();
  }
  return false;
}

void NetProxy::failed(const Peer& p, const char* what) {
  dead_ = true;
  if (c_->abortFlag.load() || c_->asyncError.load() != ncclSuccess) return;  // already failing: said elsewhere
  int culprit = p.conn ? p.conn->reportedCulprit() : -1;
  if (culprit < 0 && p.conn) culprit = p.conn->closedByPeer();
  if (culprit < 0) culprit = p.rank;
  WARN("rank %d: the network proxy of the collective kernels %s %s over %s: waiting kernels give up and the "
       "communicator fails",
       c_->rank, what, c_->describePeer(p.rank).c_str(), p.conn ? p.conn->transportName() : "?");
  c_->fail(ncclRemoteError, culprit);
}

ncclResult_t NetProxy::sendSome(Peer& p, bool* moved, bool startNew) {
  SendChannel* ch = p.conn->send();
  if (!startNew && !p.sending) return ch->progress();
  // A connection is touched only while there is something to send: a peer that destroyed its
  // communicator is then an error only when this rank still sends to it.
  if (!p.sending && !ch->pendingLocal()) {
    bool posted = false;
    for (int c = 0; c < kern::kChannels; c++) posted = posted || loadAcquire(&header_->outPosted[p.rank][c]) > p.shipped[c];
    if (!posted) return ncclSuccess;
  }
  if (!p.sending) {
    for (int k = 0; k < kern::kChannels && !p.sending; k++) {
      const int c = (p.nextCh + k) % kern::kChannels;
      if (loadAcquire(&header_->outPosted[p.rank][c]) <= p.shipped[c]) continue;
      p.sending = true;
      p.out = {};
      p.out.magic = kFrameMagic;
      p.out.ch = static_cast<uint8_t>(c);
      p.out.bytes = header_->outBytes[p.rank][c][p.shipped[c] % kern::kSlots];
      p.out.stamp = header_->outStamp[p.rank][c][p.shipped[c] % kern::kSlots];
      p.outDone = 0;
      p.nextCh = (c + 1) % kern::kChannels;
    }
  }
  while (p.sending) {
    const int c = p.out.ch;
    const size_t total = sizeof(Frame) + p.out.bytes;
    if (p.outDone < total) {
      void* buf = nullptr;
      size_t avail = 0;
      NCCLCHECK(ch->acquire(&buf, &avail));
      if (avail == 0) break;
      const size_t n = std::min(avail, total - p.outDone);
      char* dst = static_cast<char*>(buf);
      const char* data = box_ + kern::proxyOutOffset(p.rank, c, p.shipped[c]);
      for (size_t done = 0; done < n;) {
        const size_t at = p.outDone + done;
        size_t k;
        if (at < sizeof(Frame)) {
          k = std::min(n - done, sizeof(Frame) - at);
          std::memcpy(dst + done, reinterpret_cast<const char*>(&p.out) + at, k);
        } else {
          k = n - done;
          std::memcpy(dst + done, data + (at - sizeof(Frame)), k);
        }
        done += k;
      }
      ch->commit(n);
      p.outDone += n;
      *moved = true;
    }
    if (p.outDone < total) break;
    p.framesOut++;
    if (p.notice) {
      p.notice = false;
      p.sending = false;
      break;
    }
    // The bytes are in the connection's ring: the kernel may reuse the slot.
    p.shipped[c]++;
    storeRelease(&header_->outFreed[p.rank][c], p.shipped[c]);
    p.sending = false;
  }
  return ch->progress();
}

bool NetProxy::takeHeaderBytes(Peer& p, RecvChannel* ch, const void* buf, size_t avail) {
  const size_t k = std::min(avail, sizeof(Frame) - p.inHeaderHave);
  std::memcpy(p.inHeader + p.inHeaderHave, buf, k);
  ch->release(k);
  p.inHeaderHave += k;
  if (p.inHeaderHave < sizeof(Frame)) return false;
  std::memcpy(&p.in, p.inHeader, sizeof(Frame));
  p.inHeaderHave = 0;
  return true;
}

ncclResult_t NetProxy::receiveSome(Peer& p, bool* moved, bool quietWhile) {
  RecvChannel* ch = p.conn->recv();
  // Read only while a kernel waits for a chunk of this peer (or a frame is half read): a peer
  // that left after its last call is then no error, as with the host executor.
  bool wanted = p.receiving || p.inHeaderHave > 0;
  for (int c = 0; c < kern::kChannels && !wanted; c++) wanted = loadAcquire(&header_->inWanted[p.rank][c]) > p.received[c];
  if (!wanted) {
    if (quietWhile) takeNotice(p);
    return ncclSuccess;
  }
  NCCLCHECK(ch->progress());
  for (;;) {
    // Between frames, the connection is read only while the kernel still wants a chunk: a
    // peer that sent its last chunk and left is no error once that chunk is in.
    bool more = p.receiving || p.inHeaderHave > 0;
    for (int c = 0; c < kern::kChannels && !more; c++) more = loadAcquire(&header_->inWanted[p.rank][c]) > p.received[c];
    if (!more) return ncclSuccess;
    const void* buf = nullptr;
    size_t avail = 0;
    NCCLCHECK(ch->peek(&buf, &avail));
    if (!p.receiving) {
      if (avail == 0) return ncclSuccess;
      *moved = true;
      if (!takeHeaderBytes(p, ch, buf, avail)) continue;
      if (p.in.magic == kNoticeMagic && p.in.bytes == 0) {
        p.framesIn++;
        publishCall(&header_->peerCallWord[p.rank], &header_->peerCall[p.rank], p.in.stamp);
        continue;
      }
      if (p.in.magic != kFrameMagic || p.in.ch >= kern::kChannels || p.in.bytes > kern::kChunkBytes) {
        WARN("rank %d: the network proxy read a malformed chunk header from %s (magic %#x, channel %u, %llu bytes): "
             "the byte stream between the two ranks is out of step",
             c_->rank, c_->describePeer(p.rank).c_str(), p.in.magic, static_cast<unsigned>(p.in.ch),
             static_cast<unsigned long long>(p.in.bytes));
        return ncclInternalError;
      }
      p.receiving = true;
      p.inDone = 0;
      continue;
    }
    const int c = p.in.ch;
    const uint64_t g = p.received[c];
    // The slot of chunk g holds chunk g - kSlots until the kernel has freed that one.
    if (g >= static_cast<uint64_t>(kern::kSlots) && loadAcquire(&header_->inFreed[p.rank][c]) < g + 1 - kern::kSlots)
      return ncclSuccess;
    if (p.inDone < p.in.bytes) {
      if (avail == 0) return ncclSuccess;
      const size_t k = std::min<size_t>(avail, p.in.bytes - p.inDone);
      std::memcpy(box_ + kern::proxyInOffset(c_->nranks, p.rank, c, g) + p.inDone, buf, k);
      ch->release(k);
      p.inDone += k;
      *moved = true;
      if (p.inDone < p.in.bytes) continue;
    }
    header_->inStamp[p.rank][c][g % kern::kSlots] = p.in.stamp;
    p.framesIn++;
    p.received[c]++;
    storeRelease(&header_->inPosted[p.rank][c], p.received[c]);
    p.receiving = false;
  }
}

// A peer whose data the kernel does not wait for may still have sent a notice of the call its
// kernel is in (it waits for this rank): its frame is taken, so that this rank's kernel, waiting
// for a third rank, sees the mismatch (a ring of ranks each waiting for the next). Anything else
// stays in the connection, and errors are left for when its data is wanted (a peer that left
// after its last call is no error).
void NetProxy::takeNotice(Peer& p) {
  RecvChannel* ch = p.conn->recv();
  const void* buf = nullptr;
  size_t avail = 0;
  if (ch->progress() != ncclSuccess || ch->peekQuietly(&buf, &avail) != ncclSuccess || avail < sizeof(Frame)) return;
  Frame f;
  std::memcpy(&f, buf, sizeof(f));
  if (f.magic != kNoticeMagic || f.bytes != 0) return;
  // Only a whole notice is taken (one split by the end of the ring waits for the kernel to
  // want this peer's data): a half-read frame would make the peer's connection one this rank
  // must read, which fails once the peer has left.
  ch->release(sizeof(f));
  p.framesIn++;
  publishCall(&header_->peerCallWord[p.rank], &header_->peerCall[p.rank], f.stamp);
}

// Sets up a notice of the kernel's call (`word`, `call`) for peer p when the kernel waits for a
// chunk of p that has a free in slot and is not in the connection (so p has not sent it: a peer
// that left after sending everything is never written to), and p has not been told of it yet.
void NetProxy::announceCall(Peer& p, uint64_t word, const kern::KStamp& call) {
  if (p.sending || p.receiving || p.inHeaderHave > 0 || word == p.announced) return;
  bool waits = false;
  for (int c = 0; c < kern::kChannels && !waits; c++) {
    const uint64_t g = p.received[c];
    waits = loadAcquire(&header_->inWanted[p.rank][c]) > g &&
            (g < static_cast<uint64_t>(kern::kSlots) || loadAcquire(&header_->inFreed[p.rank][c]) >= g + 1 - kern::kSlots);
  }
  if (!waits) return;
  const void* buf = nullptr;
  size_t avail = 0;
  if (p.conn->recv()->peekQuietly(&buf, &avail) != ncclSuccess || avail > 0) return;
  p.announced = word;
  p.sending = true;
  p.notice = true;
  p.out = {};
  p.out.magic = kNoticeMagic;
  p.out.stamp = call;
  p.outDone = 0;
}

ncclResult_t NetProxy::pass(bool* moved, bool* quiet, bool announce) {
  *quiet = true;
  // The kernel's call, read once for every peer (word 0: none published, or being written).
  uint64_t word = 0;
  kern::KStamp call{};
  if (announce && !readCall(&header_->callWord, &header_->call, &word, &call)) word = 0;
  for (Peer& p : peers_) {
    if (word != 0) announceCall(p, word, call);
    if (sendSome(p, moved) != ncclSuccess) {
      failed(p, "cannot send to");
      return ncclRemoteError;
    }
    if (receiveSome(p, moved, announce) != ncclSuccess) {
      failed(p, "cannot receive from");
      return ncclRemoteError;
    }
    bool idle = !p.sending && !p.conn->send()->pendingLocal();
    for (int c = 0; c < kern::kChannels && idle; c++) idle = loadAcquire(&header_->outPosted[p.rank][c]) == p.shipped[c];
    *quiet = *quiet && idle;
  }
  return ncclSuccess;
}

void NetProxy::run() {
  auto lastMove = std::chrono::steady_clock::now();
  auto nap = std::chrono::microseconds(10);
  uint64_t seenWakes = 0;
  while (!stop_.load()) {
    if (c_->abortFlag.load() || c_->asyncError.load() != ncclSuccess) {
      dead_ = true;
      return;
    }
    if (const int m = mode_.load(std::memory_order_acquire); m != kRun) {
      if (realignStep(m) != ncclSuccess) return;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      lastMove = std::chrono::steady_clock::now();
      continue;
    }
    bool moved = false, quiet = false;
    const bool announce = std::chrono::steady_clock::now() - lastMove >= kNoticeAfter;
    if (pass(&moved, &quiet, announce) != ncclSuccess) return;
    const uint64_t n = passes_.fetch_add(1) + 1;
    if (quiet) quietPass_.store(n);
    const auto now = std::chrono::steady_clock::now();
    if (moved) {
      lastMove = now;
      nap = std::chrono::microseconds(10);
      continue;
    }
    if (now - lastMove < kSpinFor) {
      std::this_thread::yield();
      continue;
    }
    std::unique_lock<std::mutex> lk(mu_);
    if (wakes_ != seenWakes) {
      seenWakes = wakes_;
      lastMove = now;  // a launch: spin again
      continue;
    }
    wakeCv_.wait_for(lk, nap, [&] { return wakes_ != seenWakes || stop_.load(); });
    nap = std::min<std::chrono::microseconds>(nap * 2, kMaxNap);
  }
}

// Drops the rest of a half-read frame of p, then whole frames, until `upTo` frames have come.
ncclResult_t NetProxy::discardSome(Peer& p, uint64_t upTo, bool* done) {
  RecvChannel* ch = p.conn->recv();
  *done = false;
  NCCLCHECK(ch->progress());
  for (;;) {
    if (!p.receiving && p.inHeaderHave == 0 && p.framesIn >= upTo) {
      *done = true;
      return ncclSuccess;
    }
    const void* buf = nullptr;
    size_t avail = 0;
    NCCLCHECK(ch->peek(&buf, &avail));
    if (avail == 0) return ncclSuccess;
    if (!p.receiving) {
      if (!takeHeaderBytes(p, ch, buf, avail)) continue;
      if (p.in.magic == kNoticeMagic && p.in.bytes == 0) {
        p.framesIn++;
        continue;
      }
      if (p.in.magic != kFrameMagic || p.in.bytes > kern::kChunkBytes) {
        WARN("rank %d: the network proxy read a malformed chunk header from %s while realigning after mismatched "
             "calls (magic %#x, %llu bytes)",
             c_->rank, c_->describePeer(p.rank).c_str(), p.in.magic, static_cast<unsigned long long>(p.in.bytes));
        return ncclInternalError;
      }
      p.receiving = true;
      p.inDone = 0;
      continue;
    }
    const size_t k = std::min<size_t>(avail, p.in.bytes - p.inDone);
    ch->release(k);
    p.inDone += k;
    if (p.inDone < p.in.bytes) continue;
    p.receiving = false;
    p.framesIn++;
  }
}

ncclResult_t NetProxy::realignStep(int m) {
  if (m == kPausing || m == kPaused) {
    // Whatever arrives now was sent before the peer paused (it sends again only once every
    // rank has zeroed its streams, this one included): it is read and dropped at once, so a
    // peer finishing a frame into a full connection is never stuck behind this one.
    bool idle = true;
    for (Peer& p : peers_) {
      bool moved = false, done = false;
      if (sendSome(p, &moved, false) != ncclSuccess) {
        failed(p, "cannot send to");
        return ncclRemoteError;
      }
      if (discardSome(p, ~uint64_t(0), &done) != ncclSuccess) {
        failed(p, "cannot receive from");
        return ncclRemoteError;
      }
      idle = idle && !p.sending && !p.conn->send()->pendingLocal();
    }
    if (m == kPaused) return ncclSuccess;
    if (!idle) return ncclSuccess;
    pausedAt_.clear();
    for (const Peer& p : peers_) pausedAt_.push_back(p.framesOut);
    mode_.store(kPaused, std::memory_order_release);
  } else if (m == kDiscarding) {
    bool all = true;
    for (size_t i = 0; i < peers_.size(); i++) {
      bool done = false;
      if (discardSome(peers_[i], discardUpTo_[i], &done) != ncclSuccess) {
        failed(peers_[i], "cannot receive from");
        return ncclRemoteError;
      }
      all = all && done;
    }
    if (!all) return ncclSuccess;
    for (Peer& p : peers_) {
      Peer fresh;
      fresh.rank = p.rank;
      fresh.conn = p.conn;
      p = fresh;
    }
    mode_.store(kDiscarded, std::memory_order_release);
  }
  return ncclSuccess;
}

bool NetProxy::waitMode(int want, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (mode_.load(std::memory_order_acquire) != want) {
    if (dead_.load() || c_->abortFlag.load() || c_->asyncError.load() != ncclSuccess ||
        std::chrono::steady_clock::now() >= deadline)
      return false;
    wake();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

bool NetProxy::pause(std::chrono::milliseconds limit, std::vector<uint64_t>* framesSent) {
  mode_.store(kPausing, std::memory_order_release);
  if (!waitMode(kPaused, limit)) return false;
  framesSent->assign(c_->nranks, 0);
  for (size_t i = 0; i < peers_.size(); i++) (*framesSent)[peers_[i].rank] = pausedAt_[i];
  return true;
}

bool NetProxy::discard(const std::vector<uint64_t>& framesFrom, std::chrono::milliseconds limit) {
  discardUpTo_.clear();
  for (const Peer& p : peers_) discardUpTo_.push_back(framesFrom[p.rank]);
  mode_.store(kDiscarding, std::memory_order_release);
  return waitMode(kDiscarded, limit);
}

void NetProxy::resume() {
  mode_.store(kRun, std::memory_order_release);
  wake();
}

}  // namespace accl
