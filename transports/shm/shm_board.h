// shm_board.h: the memory of the ShmDirect board (transports/board.h) among ranks of one host.
// Each rank's anonymous segment (memfd) holds its board doorbell and its two slots; unlike the
// lazily connected rings, the board is all-to-all, so at init every rank maps every other's
// segment through /proc/<pid>/fd/<fd>, once.
#pragma once
#include <memory>
#include <vector>
#include "bootstrap/bootstrap.h"
#include "transports/board.h"

namespace accl {

class ShmBoard {
 public:
  // Collective over `bs`: every rank creates its segment of two `slotBytes` slots, the ranks
  // exchange where they are and map each other's. When any rank cannot, every rank gets
  // *out == null (no board: the tuner uses the other algorithms), never a partial board.
  static ncclResult_t create(Bootstrap& bs, int rank, int nranks, uint64_t nonce, size_t slotBytes,
                             std::unique_ptr<ShmBoard>* out);
  ~ShmBoard();
  ShmBoard(const ShmBoard&) = delete;
  ShmBoard& operator=(const ShmBoard&) = delete;

  // Points `out` at every rank's slots and doorbells; ownBell is the one this rank sleeps on.
  void fill(Board* out) const;

 private:
  ShmBoard() = default;
  struct Mapping;
  int fd_ = -1;
  size_t slotBytes_ = 0;
  int rank_ = 0;
  bool peersReadable_ = false;  // every rank can read every other's memory (process_vm_readv)
  std::vector<int32_t> pids_;   // index = rank
  std::vector<std::unique_ptr<Mapping>> maps_;  // index = rank
};

}  // namespace accl
