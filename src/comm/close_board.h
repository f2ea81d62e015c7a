// close_board.h: how a rank learns that the other processes of its host have unmapped its
// collective mailbox (comm/kernel_path.h), so that it frees the mailbox only then: freeing
// exported device memory that another process still has open is undefined behaviour. A flag
// written into the mailbox itself cannot say it, as it must be written before the mapping
// closes. So each rank owns a small anonymous shared-memory segment (memfd) of one flag per
// rank; a peer process maps it through /proc/<pid>/fd/<fd> at init and sets its flag there
// after it has closed its CUDA IPC mapping of the mailbox.
#pragma once
#include <cstdint>
#include <memory>

namespace accl {

class CloseBoard {
 public:
  ~CloseBoard();
  // This rank's board (nullptr when shared memory cannot be made: the caller falls back).
  static std::unique_ptr<CloseBoard> create();
  // The board of a rank in process `pid` (this pid namespace) with descriptor `fd`; nullptr
  // when it cannot be mapped.
  static std::unique_ptr<CloseBoard> open(int pid, int fd);
  int fd() const { return fd_; }
  // Set by `rank` once it has closed its mapping of the owner's mailbox.
  void markClosed(int rank);
  bool closed(int rank) const;

 private:
  CloseBoard() = default;
  int fd_ = -1;  // own board only
  uint32_t* flags_ = nullptr;
};

}  // namespace accl
