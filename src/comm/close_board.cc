#include "comm/close_board.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <string>
#include "collective_args.h"

namespace accl {
namespace {

constexpr size_t kBoardBytes = 4096;
static_assert(kern::kMailboxRanks * sizeof(uint32_t) <= kBoardBytes, "close board");

uint32_t* mapBoard(int fd) {
  void* p = mmap(nullptr, kBoardBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<uint32_t*>(p);
}

}  // namespace

CloseBoard::~CloseBoard() {
  if (flags_) munmap(flags_, kBoardBytes);
  if (fd_ >= 0) close(fd_);
}

std::unique_ptr<CloseBoard> CloseBoard::create() {
  std::unique_ptr<CloseBoard> b(new CloseBoard);
  b->fd_ = memfd_create("accl-mailbox-closed", MFD_CLOEXEC);
  if (b->fd_ < 0 || ftruncate(b->fd_, kBoardBytes) != 0 || (b->flags_ = mapBoard(b->fd_)) == nullptr) return nullptr;
  return b;
}

std::unique_ptr<CloseBoard> CloseBoard::open(int pid, int fd) {
  if (pid <= 0 || fd < 0) return nullptr;
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int local = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (local < 0) return nullptr;
  std::unique_ptr<CloseBoard> b(new CloseBoard);
  b->flags_ = mapBoard(local);
  close(local);
  if (b->flags_ == nullptr) return nullptr;
  return b;
}

void CloseBoard::markClosed(int rank) { __atomic_store_n(&flags_[rank], 1u, __ATOMIC_RELEASE); }

bool CloseBoard::closed(int rank) const { return __atomic_load_n(&flags_[rank], __ATOMIC_ACQUIRE) != 0; }

}  // namespace accl
