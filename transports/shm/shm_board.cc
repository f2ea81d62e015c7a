#include "transports/shm/shm_board.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include "base/check.h"

namespace accl {
namespace {

// Layout: the owner's doorbell (one cache line), its departed flag (one cache line, written
// once), its read-done sequence (one cache line), its sliced sequence (one cache line), then
// slot 0 and slot 1.
constexpr size_t kBellBytes = 64;
constexpr size_t kDepartedOffset = kBellBytes;
constexpr size_t kReadDoneOffset = kDepartedOffset + 64;
constexpr size_t kSlicedOffset = kReadDoneOffset + 64;
constexpr size_t kSlotsOffset = kSlicedOffset + 64;
static_assert(sizeof(Doorbell) <= kBellBytes);
size_t segmentBytes(size_t slotBytes) { return kSlotsOffset + 2 * boardSlotStride(slotBytes); }

struct Where {
  int32_t pid;
  int32_t fd;  // -1: this rank has no board
  uint64_t nonce;
  uint64_t probe;  // address of a known word (the nonce) in this rank's process, for peers to read
};

// Whether this process may read rank `pid`'s memory with process_vm_readv (same user, no
// ptrace restriction, syscall not filtered): tried once on a word whose value we know.
bool canReadProcess(int32_t pid, uint64_t addr, uint64_t expect) {
  uint64_t got = 0;
  iovec local{&got, sizeof(got)};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(got)};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(got)) && got == expect;
}

void* mapFd(int fd, size_t bytes) {
  // Pre-faulted: first touch is expensive on these machines; pay it at init, not per op.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

struct ShmBoard::Mapping {
  void* base = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (base) munmap(base, bytes);
  }
  char* at(size_t off) const { return static_cast<char*>(base) + off; }
};

ShmBoard::~ShmBoard() {
  maps_.clear();
  if (fd_ >= 0) ::close(fd_);
}

ncclResult_t ShmBoard::create(Bootstrap& bs, int rank, int nranks, uint64_t nonce, size_t slotBytes,
                              std::unique_ptr<ShmBoard>* out) {
  out->reset();
  std::unique_ptr<ShmBoard> b(new ShmBoard());
  b->slotBytes_ = slotBytes;
  b->rank_ = rank;
  b->maps_.resize(nranks);
  const size_t bytes = segmentBytes(slotBytes);
  std::vector<Where> where(nranks);
  // The probe word lives as long as this call: every peer reads it before the second all-gather.
  const uint64_t probeWord = nonce;
  where[rank] = {static_cast<int32_t>(getpid()), -1, nonce, reinterpret_cast<uint64_t>(&probeWord)};
  b->fd_ = memfd_create("accl-board", MFD_CLOEXEC);
  if (b->fd_ >= 0 && ftruncate(b->fd_, static_cast<off_t>(bytes)) == 0) {
    auto m = std::make_unique<Mapping>();
    m->bytes = bytes;
    m->base = mapFd(b->fd_, bytes);
    if (m->base) {
      new (m->base) Doorbell();
      new (m->at(kDepartedOffset)) std::atomic<uint32_t>(0);
      new (m->at(kReadDoneOffset)) std::atomic<uint64_t>(0);
      new (m->at(kSlicedOffset)) std::atomic<uint64_t>(0);
      b->maps_[rank] = std::move(m);
      where[rank].fd = b->fd_;
    }
  }
  if (where[rank].fd < 0) WARN("rank %d: no ShmDirect board (%s); small collectives use the rings", rank, strerror(errno));
  NCCLCHECK(bs.allGather(where.data(), sizeof(Where)));
  int ok = 1;
  int readable = 1;
  for (int p = 0; p < nranks; p++)
    if (p != rank && readable && !canReadProcess(where[p].pid, where[p].probe, where[p].nonce)) {
      INFO(kSubsysShm, "rank %d: cannot read rank %d's memory (process_vm_readv: %s); ShmDirect copies through the board",
           rank, p, strerror(errno));
      readable = 0;
    }
  for (int p = 0; p < nranks && ok; p++) {
    if (p == rank) continue;
    if (where[p].fd < 0 || where[p].nonce != nonce) {
      ok = 0;
      break;
    }
    std::string path = "/proc/" + std::to_string(where[p].pid) + "/fd/" + std::to_string(where[p].fd);
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    auto m = std::make_unique<Mapping>();
    m->bytes = bytes;
    m->base = fd >= 0 ? mapFd(fd, bytes) : nullptr;
    if (fd >= 0) ::close(fd);
    if (!m->base) {
      INFO(kSubsysShm, "rank %d: cannot map rank %d's board (%s: %s)", rank, p, path.c_str(), strerror(errno));
      ok = 0;
      break;
    }
    b->maps_[p] = std::move(m);
  }
  if (where[rank].fd < 0) ok = 0;
  // Every rank must agree, or their tuners would choose differently.
  std::vector<int> oks(nranks);
  oks[rank] = ok | (readable << 1);
  NCCLCHECK(bs.allGather(oks.data(), sizeof(int)));
  for (int v : oks) {
    ok = ok && (v & 1);
    readable = readable && (v & 2);
  }
  if (!ok) return ncclSuccess;
  b->peersReadable_ = readable != 0;
  for (const Where& w : where) b->pids_.push_back(w.pid);
  INFO(kSubsysShm, "rank %d: ShmDirect board of %zu-byte slots mapped for %d ranks%s", rank, slotBytes, nranks,
       readable ? ", peers' memory readable in place" : "");
  *out = std::move(b);
  return ncclSuccess;
}

void ShmBoard::fill(Board* out) const {
  *out = Board();
  out->capacity = slotBytes_;
  const size_t stride = boardSlotStride(slotBytes_);
  for (int parity = 0; parity < 2; parity++)
    for (auto& m : maps_) out->slots[parity].push_back(reinterpret_cast<BoardSlot*>(m->at(kSlotsOffset + parity * stride)));
  for (size_t p = 0; p < maps_.size(); p++)
    out->bells.push_back(static_cast<int>(p) == rank_ ? nullptr : reinterpret_cast<Doorbell*>(maps_[p]->at(0)));
  out->ownBell = reinterpret_cast<Doorbell*>(maps_[rank_]->at(0));
  for (auto& m : maps_) out->departed.push_back(reinterpret_cast<std::atomic<uint32_t>*>(m->at(kDepartedOffset)));
  out->peersReadable = peersReadable_ && out->capacity >= sizeof(BoardAddressPost);
  out->pids = pids_;
  for (auto& m : maps_) out->readDone.push_back(reinterpret_cast<std::atomic<uint64_t>*>(m->at(kReadDoneOffset)));
  for (auto& m : maps_) out->sliced.push_back(reinterpret_cast<std::atomic<uint64_t>*>(m->at(kSlicedOffset)));
}

}  // namespace accl
