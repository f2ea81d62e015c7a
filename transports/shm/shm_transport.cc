#include "transports/shm/shm_transport.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include "base/check.h"
#include "base/param.h"

namespace accl {
namespace {

constexpr uint64_t kSegmentMagic = 0x4143434c53484d32ull;  // "ACCLSHM2"
constexpr size_t kPage = 4096;

// RingHeader::closed: 0 open; 1 closed for an unknown reason; 2 + r closed because rank r
// was lost; kDeparted | r: rank r destroyed its communicator (ncclCommDestroy).
constexpr uint32_t kDeparted = 0x40000000u;

// Zero bytes are a valid fresh ring, so the sparse file's zero pages need no initialisation.
struct alignas(64) RingHeader {
  alignas(64) std::atomic<uint64_t> tail{0};  // bytes produced; written by the sender
  alignas(64) std::atomic<uint64_t> head{0};  // bytes consumed; written by the receiver
  alignas(64) std::atomic<uint32_t> closed{0};
};
static_assert(sizeof(RingHeader) <= kPage);

struct SegmentHeader {
  uint64_t magic;
  uint64_t ownerNonce;  // the owner's PeerInfo::commNonce: tells a reused pid/fd apart
  int32_t ownerRank;
  int32_t nranks;
  uint64_t ringBytes;
  Doorbell bell;
  // 1 once the owner destroyed its communicator: a peer waiting on a ring the owner never
  // connected (so never marked) still learns that no data will come.
  std::atomic<uint32_t> departed;
};
static_assert(sizeof(SegmentHeader) <= kPage);

// Layout: one header page, then per writer rank s a slot: a header page and ringBytes of data.
size_t slotBytes(size_t ringBytes) { return kPage + ringBytes; }
size_t slotOffset(int writer, size_t ringBytes) { return kPage + static_cast<size_t>(writer) * slotBytes(ringBytes); }
size_t segmentBytes(int nranks, size_t ringBytes) { return slotOffset(nranks, ringBytes); }

uint64_t pidNamespace() {
  struct stat st{};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

// One mmap of a segment (or part of one), unmapped when dropped.
struct ShmTransport::Mapping {
  void* base = nullptr;
  size_t bytes = 0;
  Mapping(void* b, size_t n) : base(b), bytes(n) {}
  ~Mapping() {
    if (base) munmap(base, bytes);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  char* at(size_t off) const { return static_cast<char*>(base) + off; }
};

namespace {

using Mapping = ShmTransport::Mapping;

ncclResult_t mapShared(int fd, size_t offset, size_t bytes, const char* what, std::unique_ptr<Mapping>* out) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) {
    WARN("shm: mmap of %s (%zu bytes at %zu) failed: %s", what, bytes, offset, strerror(errno));
    return ncclSystemError;
  }
  *out = std::make_unique<Mapping>(p, bytes);
  return ncclSuccess;
}

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

// A ring with nothing to read (or no room) whose peer left: closed by the peer, or the peer's
// segment says its owner destroyed its communicator.
ncclResult_t checkPeerLeft(const RingHeader& ring, const SegmentHeader& peer, int peerRank, const char* dir) {
  if (ring.closed.load(std::memory_order_acquire)) return closedError(ring, peerRank, dir);
  if (peer.departed.load(std::memory_order_acquire)) {
    WARN("shm connection %s rank %d: rank %d destroyed its communicator (ncclCommDestroy) while this rank still "
         "needs it (it never made this call, or left it early)",
         dir, peerRank, peerRank);
    return ncclRemoteError;
  }
  return ncclSuccess;
}

class ShmSend final : public SendChannel {
 public:
  ShmSend(RingHeader* ring, char* data, size_t cap, const SegmentHeader* peer, int peerRank)
      : ring_(ring), data_(data), cap_(cap), peer_(peer), peerBell_(const_cast<Doorbell*>(&peer->bell)),
        peerRank_(peerRank), tail_(ring->tail.load(std::memory_order_relaxed)) {}
  ncclResult_t acquire(void** buf, size_t* avail) override {
    uint64_t head = ring_->head.load(std::memory_order_acquire);
    size_t free = cap_ - (tail_ - head);
    size_t off = tail_ & (cap_ - 1);
    *buf = data_ + off;
    *avail = free < cap_ - off ? free : cap_ - off;
    if (*avail == 0) return checkPeerLeft(*ring_, *peer_, peerRank_, "to");
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
  const SegmentHeader* peer_;
  Doorbell* peerBell_;
  int peerRank_;
  uint64_t tail_;
};

class ShmRecv final : public RecvChannel {
 public:
  ShmRecv(RingHeader* ring, const char* data, size_t cap, const SegmentHeader* peer, int peerRank)
      : ring_(ring), data_(data), cap_(cap), peer_(peer), peerBell_(const_cast<Doorbell*>(&peer->bell)),
        peerRank_(peerRank), head_(ring->head.load(std::memory_order_relaxed)) {}
  ncclResult_t peek(const void** buf, size_t* avail) override { return peekAt(buf, avail, true); }
  ncclResult_t peekQuietly(const void** buf, size_t* avail) override { return peekAt(buf, avail, false); }
  ncclResult_t peekAt(const void** buf, size_t* avail, bool warnOnClose) {
    uint64_t tail = ring_->tail.load(std::memory_order_acquire);
    size_t ready = tail - head_;
    size_t off = head_ & (cap_ - 1);
    *buf = data_ + off;
    *avail = ready < cap_ - off ? ready : cap_ - off;
    if (*avail > 0 || !peerLeft()) return ncclSuccess;
    // The peer may have committed its last bytes and left between the two loads above: what
    // it wrote before leaving is read first (an error only once nothing is left).
    ready = ring_->tail.load(std::memory_order_acquire) - head_;
    *avail = ready < cap_ - off ? ready : cap_ - off;
    if (*avail > 0) return ncclSuccess;
    if (!warnOnClose) return ncclRemoteError;
    return checkPeerLeft(*ring_, *peer_, peerRank_, "from");
  }
  void release(size_t n) override {
    head_ += n;
    ring_->head.store(head_, std::memory_order_release);
    ringDoorbell(peerBell_);
  }
  uint64_t position() const override { return head_; }

 private:
  bool peerLeft() const {
    return ring_->closed.load(std::memory_order_acquire) != 0 || peer_->departed.load(std::memory_order_acquire);
  }
  RingHeader* ring_;
  const char* data_;
  size_t cap_;
  const SegmentHeader* peer_;
  Doorbell* peerBell_;
  int peerRank_;
  uint64_t head_;
};

class ShmConnection final : public PeerConnection {
 public:
  // `peerHeader` and `outSlot` map the peer's segment; `inSlot` lies in this rank's own.
  ShmConnection(std::unique_ptr<Mapping> peerHeader, std::unique_ptr<Mapping> outSlot, char* inSlot, size_t cap,
                Doorbell* myBell, int peerRank)
      : peerHeader_(std::move(peerHeader)), outSlot_(std::move(outSlot)),
        outRing_(reinterpret_cast<RingHeader*>(outSlot_->at(0))), inRing_(reinterpret_cast<RingHeader*>(inSlot)),
        peerBell_(&reinterpret_cast<SegmentHeader*>(peerHeader_->at(0))->bell), myBell_(myBell), peerRank_(peerRank),
        send_(outRing_, outSlot_->at(kPage), cap, peerSegment(), peerRank),
        recv_(inRing_, inSlot + kPage, cap, peerSegment(), peerRank) {}
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
    if (peerSegment()->departed.load(std::memory_order_acquire)) return peerRank_;
    for (RingHeader* r : {inRing_, outRing_}) {
      uint32_t v = r->closed.load(std::memory_order_acquire);
      if (v & kDeparted) return static_cast<int>(v & ~kDeparted);
      if (v >= 2) return static_cast<int>(v - 2);
    }
    return -1;
  }
  const char* transportName() const override { return "SHM"; }

 private:
  const SegmentHeader* peerSegment() const { return reinterpret_cast<const SegmentHeader*>(peerHeader_->at(0)); }
  std::unique_ptr<Mapping> peerHeader_;
  std::unique_ptr<Mapping> outSlot_;
  RingHeader* outRing_;
  RingHeader* inRing_;
  Doorbell* peerBell_;
  Doorbell* myBell_;
  int peerRank_;
  ShmSend send_;
  ShmRecv recv_;
};

}  // namespace

ShmTransport::ShmTransport() = default;

ShmTransport::~ShmTransport() {
  own_.reset();
  if (fd_ >= 0) ::close(fd_);
}

ncclResult_t ShmTransport::publish(TransportSetup& ctx, PeerInfo* me) {
  me->shmFd = -1;
  me->pidNs = pidNamespace();
  if (param::shmDisable() != 0) return ncclSuccess;
  ringBytes_ = ctx.ringBytes;
  nranks_ = ctx.nranks;
  fd_ = memfd_create("accl-shm", MFD_CLOEXEC);
  if (fd_ < 0) {
    WARN("shm: memfd_create failed: %s; ranks on this host will use sockets", strerror(errno));
    return ncclSuccess;
  }
  const size_t bytes = segmentBytes(ctx.nranks, ringBytes_);
  if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
    WARN("shm: ftruncate of the %zu-byte segment failed: %s", bytes, strerror(errno));
    return ncclSystemError;
  }
  NCCLCHECK(mapShared(fd_, 0, bytes, "this rank's segment", &own_));
  auto* h = new (own_->at(0)) SegmentHeader();
  h->ownerNonce = me->commNonce;
  h->ownerRank = ctx.rank;
  h->nranks = ctx.nranks;
  h->ringBytes = ringBytes_;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegmentMagic;
  me->shmFd = fd_;
  INFO(kSubsysShm, "rank %d: shm segment (memfd %d): %d sparse rings of %zu bytes", ctx.rank, fd_, ctx.nranks,
       ringBytes_);
  return ncclSuccess;
}

Doorbell* ShmTransport::sharedBell() {
  return own_ ? &reinterpret_cast<SegmentHeader*>(own_->at(0))->bell : nullptr;
}

bool ShmTransport::canConnect(const PeerInfo& me, const PeerInfo& peer) const {
  return own_ && me.shmFd >= 0 && peer.shmFd >= 0 && me.hostHash == peer.hostHash && me.pidNs == peer.pidNs;
}

ncclResult_t ShmTransport::connect(TransportSetup& ctx, int peer, std::unique_ptr<PeerConnection>* out) {
  const PeerInfo& info = (*ctx.peers)[peer];
  std::string path = "/proc/" + std::to_string(info.pid) + "/fd/" + std::to_string(info.shmFd);
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    // The peer closed its segment before this rank first needed it: it destroyed its
    // communicator (or exited) after its last use of this pair. Whatever it sent already lies in
    // this rank's own segment, so receives drain that and then fail naming it; sends fail at once.
    INFO(kSubsysShm, "rank %d: %s closed its shared memory before this rank connected (%s): it left", ctx.rank,
         ctx.describePeer(peer).c_str(), path.c_str());
    return departedPeer(peer, out);
  }
  if (fd < 0) {
    WARN("rank %d: cannot open the shared memory of %s (%s: %s): the process is gone or not accessible",
         ctx.rank, ctx.describePeer(peer).c_str(), path.c_str(), strerror(errno));
    return ncclRemoteError;
  }
  std::unique_ptr<Mapping> header, slot;
  ncclResult_t res = mapShared(fd, 0, kPage, "a peer's segment header", &header);
  if (res == ncclSuccess) res = mapShared(fd, slotOffset(ctx.rank, ringBytes_), slotBytes(ringBytes_), "a peer's ring", &slot);
  ::close(fd);
  NCCLCHECK(res);
  const auto* h = reinterpret_cast<const SegmentHeader*>(header->at(0));
  if (h->magic != kSegmentMagic || h->ownerRank != peer || h->ownerNonce != info.commNonce ||
      h->ringBytes != ringBytes_ || h->nranks != ctx.nranks) {
    WARN("rank %d: %s is not the shared memory segment of %s (another process reused its pid?)", ctx.rank,
         path.c_str(), ctx.describePeer(peer).c_str());
    return ncclRemoteError;
  }
  auto conn = std::make_unique<ShmConnection>(std::move(header), std::move(slot), own_->at(slotOffset(peer, ringBytes_)),
                                              ringBytes_, sharedBell(), peer);
  *out = std::move(conn);
  return ncclSuccess;
}

ncclResult_t ShmTransport::departedPeer(int peer, std::unique_ptr<PeerConnection>* out) {
  // Private stand-ins for the peer's header and our outgoing slot: the header says "departed",
  // the slot is full and closed, so nothing is ever written where no one reads.
  void* h = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* s = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (h == MAP_FAILED || s == MAP_FAILED) {
    if (h != MAP_FAILED) munmap(h, kPage);
    if (s != MAP_FAILED) munmap(s, 2 * kPage);
    WARN("shm: mmap of %zu bytes failed: %s", 3 * kPage, strerror(errno));
    return ncclSystemError;
  }
  auto header = std::make_unique<Mapping>(h, kPage);
  auto slot = std::make_unique<Mapping>(s, 2 * kPage);
  new (h) SegmentHeader{};
  reinterpret_cast<SegmentHeader*>(h)->departed.store(1, std::memory_order_release);
  auto* ring = new (s) RingHeader();
  ring->tail.store(ringBytes_, std::memory_order_relaxed);
  ring->closed.store(kDeparted | static_cast<uint32_t>(peer), std::memory_order_release);
  *out = std::make_unique<ShmConnection>(std::move(header), std::move(slot), own_->at(slotOffset(peer, ringBytes_)),
                                         ringBytes_, sharedBell(), peer);
  return ncclSuccess;
}

void ShmTransport::depart() {
  if (own_) reinterpret_cast<SegmentHeader*>(own_->at(0))->departed.store(1, std::memory_order_release);
}

size_t ShmTransport::residentBytes() const {
  struct stat st{};
  if (fd_ < 0 || fstat(fd_, &st) != 0) return 0;
  return static_cast<size_t>(st.st_blocks) * 512;
}

}  // namespace accl
