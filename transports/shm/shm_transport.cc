#include "transports/shm/shm_transport.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <cstring>
#include "base/check.h"

namespace accl {
namespace {

constexpr uint64_t kSegmentMagic = 0x4143434c53484d31ull;  // "ACCLSHM1"

// RingHeader::closed: 0 open; 1 closed for an unknown reason; 2 + r closed because rank r
// was lost; kDeparted | r: rank r destroyed its communicator (ncclCommDestroy).
constexpr uint32_t kDeparted = 0x40000000u;

struct alignas(64) RingHeader {
  alignas(64) std::atomic<uint64_t> tail{0};  // bytes produced; written by the sender
  alignas(64) std::atomic<uint64_t> head{0};  // bytes consumed; written by the receiver
  alignas(64) std::atomic<uint32_t> closed{0};
};

struct SegmentHeader {
  uint64_t magic;
  int32_t ownerLocal;
  int32_t nLocal;
  uint64_t ringBytes;
  Doorbell bell;
};

size_t headerBytes() { return (sizeof(SegmentHeader) + 4095) & ~size_t(4095); }
size_t slotBytes(size_t ringBytes) { return sizeof(RingHeader) + ringBytes; }

}  // namespace

struct ShmDomain::Segment {
  void* base = nullptr;
  size_t bytes = 0;
  std::string name;
  bool owned = false;
  ~Segment() {
    if (base) munmap(base, bytes);
    if (owned && !name.empty()) shm_unlink(name.c_str());
  }
  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base); }
  RingHeader* ring(int slot, size_t ringBytes) const {
    return reinterpret_cast<RingHeader*>(static_cast<char*>(base) + headerBytes() + slot * slotBytes(ringBytes));
  }
  char* data(int slot, size_t ringBytes) const { return reinterpret_cast<char*>(ring(slot, ringBytes) + 1); }
};

namespace {

ncclResult_t closedError(const RingHeader& ring, int peerRank, const char* dir) {
  if (ring.closed.load(std::memory_order_acquire) & kDeparted) {
    WARN("shm connection %s rank %d: rank %d destroyed its communicator (ncclCommDestroy) while this rank still "
         "needs it (it never made this call, or left it early)",
         dir, peerRank, peerRank);
  } else {
    WARN("shm connection %s rank %d was closed by the peer (it aborted or failed)", dir, peerRank);
  }
  return ncclRemoteError;
}

class ShmSend final : public SendChannel {
 public:
  ShmSend(RingHeader* ring, char* data, size_t cap, Doorbell* peerBell, int peerRank)
      : ring_(ring), data_(data), cap_(cap), peerBell_(peerBell), peerRank_(peerRank),
        tail_(ring->tail.load(std::memory_order_relaxed)) {}
  ncclResult_t acquire(void** buf, size_t* avail) override {
    uint64_t head = ring_->head.load(std::memory_order_acquire);
    size_t free = cap_ - (tail_ - head);
    size_t off = tail_ & (cap_ - 1);
    *buf = data_ + off;
    *avail = free < cap_ - off ? free : cap_ - off;
    if (*avail == 0 && ring_->closed.load(std::memory_order_acquire)) return closedError(*ring_, peerRank_, "to");
    return ncclSuccess;
  }
  void commit(size_t n) override {
    tail_ += n;
    ring_->tail.store(tail_, std::memory_order_release);
    ringDoorbell(peerBell_);
  }
  uint64_t position() const override { return tail_; }

 private:
  RingHeader* ring_;
  char* data_;
  size_t cap_;
  Doorbell* peerBell_;
  int peerRank_;
  uint64_t tail_;
};

class ShmRecv final : public RecvChannel {
 public:
  ShmRecv(RingHeader* ring, const char* data, size_t cap, Doorbell* peerBell, int peerRank)
      : ring_(ring), data_(data), cap_(cap), peerBell_(peerBell), peerRank_(peerRank),
        head_(ring->head.load(std::memory_order_relaxed)) {}
  ncclResult_t peek(const void** buf, size_t* avail) override {
    uint64_t tail = ring_->tail.load(std::memory_order_acquire);
    size_t ready = tail - head_;
    size_t off = head_ & (cap_ - 1);
    *buf = data_ + off;
    *avail = ready < cap_ - off ? ready : cap_ - off;
    if (*avail == 0 && ring_->closed.load(std::memory_order_acquire)) return closedError(*ring_, peerRank_, "from");
    return ncclSuccess;
  }
  void release(size_t n) override {
    head_ += n;
    ring_->head.store(head_, std::memory_order_release);
    ringDoorbell(peerBell_);
  }
  uint64_t position() const override { return head_; }

 private:
  RingHeader* ring_;
  const char* data_;
  size_t cap_;
  Doorbell* peerBell_;
  int peerRank_;
  uint64_t head_;
};

class ShmConnection final : public PeerConnection {
 public:
  ShmConnection(RingHeader* outRing, char* outData, RingHeader* inRing, char* inData, size_t cap,
                Doorbell* peerBell, Doorbell* myBell, int peerRank)
      : outRing_(outRing), inRing_(inRing), peerBell_(peerBell), myBell_(myBell),
        send_(outRing, outData, cap, peerBell, peerRank), recv_(inRing, inData, cap, peerBell, peerRank) {}
  SendChannel* send() override { return &send_; }
  RecvChannel* recv() override { return &recv_; }
  void close(int culprit) override { mark(culprit >= 0 ? static_cast<uint32_t>(culprit) + 2 : 1); }
  void depart(int myRank) override { mark(kDeparted | static_cast<uint32_t>(myRank)); }
  void mark(uint32_t v) {
    outRing_->closed.store(v, std::memory_order_release);
    inRing_->closed.store(v, std::memory_order_release);
    ringDoorbell(peerBell_);
    ringDoorbell(myBell_);
  }
  int reportedCulprit() const override {
    for (RingHeader* r : {inRing_, outRing_}) {
      uint32_t v = r->closed.load(std::memory_order_acquire);
      if (v & kDeparted) return static_cast<int>(v & ~kDeparted);
      if (v >= 2) return static_cast<int>(v - 2);
    }
    return -1;
  }
  const char* transportName() const override { return "SHM"; }

 private:
  RingHeader* outRing_;
  RingHeader* inRing_;
  Doorbell* peerBell_;
  Doorbell* myBell_;
  ShmSend send_;
  ShmRecv recv_;
};

ncclResult_t mapSegment(const std::string& name, size_t bytes, bool create, void** out) {
  int fd = shm_open(name.c_str(), create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0) {
    WARN("shm_open(%s) failed: %s", name.c_str(), strerror(errno));
    return ncclSystemError;
  }
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    WARN("ftruncate(%s, %zu) failed: %s (is /dev/shm large enough?)", name.c_str(), bytes, strerror(errno));
    ::close(fd);
    shm_unlink(name.c_str());
    return ncclSystemError;
  }
  // Pre-fault: first touch of fresh pages is expensive here, so pay it at init, not per op.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    WARN("mmap of %s (%zu bytes) failed: %s", name.c_str(), bytes, strerror(errno));
    if (create) shm_unlink(name.c_str());
    return ncclSystemError;
  }
  *out = p;
  return ncclSuccess;
}

}  // namespace

ShmDomain::~ShmDomain() = default;

std::string ShmDomain::segmentName(int local) const { return nameBase_ + "-" + std::to_string(local); }

ncclResult_t ShmDomain::create(const std::string& nameBase, int myLocal, int nLocal, size_t ringBytes,
                               std::unique_ptr<ShmDomain>* out) {
  std::unique_ptr<ShmDomain> d(new ShmDomain());
  d->nameBase_ = nameBase;
  d->myLocal_ = myLocal;
  d->nLocal_ = nLocal;
  d->ringBytes_ = ringBytes;
  d->segments_.resize(nLocal);
  auto seg = std::make_unique<Segment>();
  seg->name = d->segmentName(myLocal);
  seg->bytes = headerBytes() + nLocal * slotBytes(ringBytes);
  NCCLCHECK(mapSegment(seg->name, seg->bytes, true, &seg->base));
  seg->owned = true;
  auto* h = new (seg->base) SegmentHeader();
  h->ownerLocal = myLocal;
  h->nLocal = nLocal;
  h->ringBytes = ringBytes;
  for (int s = 0; s < nLocal; s++) new (seg->ring(s, ringBytes)) RingHeader();
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegmentMagic;
  INFO(kSubsysShm, "shm segment %s: %d rings of %zu bytes", seg->name.c_str(), nLocal, ringBytes);
  d->segments_[myLocal] = std::move(seg);
  *out = std::move(d);
  return ncclSuccess;
}

ncclResult_t ShmDomain::attachPeers() {
  for (int l = 0; l < nLocal_; l++) {
    if (segments_[l]) continue;
    auto seg = std::make_unique<Segment>();
    seg->name = segmentName(l);
    seg->bytes = headerBytes() + nLocal_ * slotBytes(ringBytes_);
    NCCLCHECK(mapSegment(seg->name, seg->bytes, false, &seg->base));
    if (seg->header()->magic != kSegmentMagic || seg->header()->ringBytes != ringBytes_) {
      WARN("shm segment %s has an unexpected layout (another job reusing the name?)", seg->name.c_str());
      return ncclSystemError;
    }
    segments_[l] = std::move(seg);
  }
  return ncclSuccess;
}

void ShmDomain::unlinkOwn() {
  auto& seg = segments_[myLocal_];
  if (seg && seg->owned) {
    shm_unlink(seg->name.c_str());
    seg->owned = false;
  }
}

Doorbell* ShmDomain::bell() { return &segments_[myLocal_]->header()->bell; }

std::unique_ptr<PeerConnection> ShmDomain::connect(int peerLocal, int peerRank) {
  Segment* mine = segments_[myLocal_].get();
  Segment* theirs = segments_[peerLocal].get();
  return std::make_unique<ShmConnection>(theirs->ring(myLocal_, ringBytes_), theirs->data(myLocal_, ringBytes_),
                                         mine->ring(peerLocal, ringBytes_), mine->data(peerLocal, ringBytes_),
                                         ringBytes_, &theirs->header()->bell, &mine->header()->bell, peerRank);
}

}  // namespace accl
