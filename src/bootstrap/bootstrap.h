// bootstrap.h: out-of-band rendezvous and small-message exchange between the ranks of a
// communicator, over TCP on the selected interface. Every connection opens with the job's
// 64-bit magic (random per unique id); a connection with a wrong magic is dropped and logged.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "nccl.h"
#include "net/socket.h"

namespace accl {

inline constexpr size_t kUniqueIdLabelBytes = 80;

// What an ncclUniqueId holds (fits in NCCL_UNIQUE_ID_BYTES). The root address is stored
// compactly: a whole net::SockAddr (sockaddr_storage, 128 bytes) would not fit.
struct UniqueIdContents {
  uint64_t magic;  // random per id; kCommIdMagic for NCCL_COMM_ID
  union {
    sockaddr_in v4;
    sockaddr_in6 v6;
  } rootAddr;      // rendezvous root address; use root() / setRoot()
  // What the id is for ("ncclGetUniqueId", "ncclCommSplit colour 1 of comm 0x..."): every
  // joining rank presents it, so a rank that reaches another communicator's root is told both.
  char label[kUniqueIdLabelBytes];
  net::SockAddr root() const;
  void setRoot(const net::SockAddr& addr);
  void setLabel(const std::string& text);  // truncated to fit, always NUL-terminated
};
static_assert(sizeof(UniqueIdContents) <= NCCL_UNIQUE_ID_BYTES);

// The fixed, well-known magic of ids made from NCCL_COMM_ID (every rank computes the same id).
inline constexpr uint64_t kCommIdMagic = 0x41434c434f4d4d49ull;  // "ACLCOMMI"

ncclUniqueId encodeUniqueId(const UniqueIdContents& contents);
UniqueIdContents decodeUniqueId(const ncclUniqueId& id);

// ncclGetUniqueId: with NCCL_COMM_ID set, encodes that address (no listener). Otherwise
// starts a root listener thread on the selected interface that serves one rendezvous.
ncclResult_t bootstrapGetUniqueId(ncclUniqueId* id);
// A fresh rendezvous for a communicator made inside a running job (split, shrink, InitAll):
// always a new root with a random magic, whatever NCCL_COMM_ID says (that names only the
// first communicator's root). `label` says what it is for (shown when a wrong rank joins).
ncclResult_t bootstrapNewUniqueId(ncclUniqueId* id, const std::string& label);

class Bootstrap {
 public:
  // Collective over all `nranks` ranks: rendezvous through the root of `id`. With
  // NCCL_COMM_ID, rank 0 starts the root listener itself. `abortFlag` interrupts waits.
  static ncclResult_t init(const ncclUniqueId& id, int rank, int nranks, const std::atomic<int>* abortFlag,
                           std::unique_ptr<Bootstrap>* out);
  ~Bootstrap();

  int rank() const;
  int nranks() const;
  uint64_t magic() const;

  // data holds nranks slots of `bytesPerRank`; this rank's slot is filled on entry; on return
  // all slots are filled. Ring algorithm over persistent connections to prev/next.
  ncclResult_t allGather(void* data, size_t bytesPerRank);
  ncclResult_t barrier();
  // Point-to-point message to/from any rank (tagged; unexpected messages are queued).
  ncclResult_t send(int peer, int tag, const void* data, size_t size);
  ncclResult_t recv(int peer, int tag, void* data, size_t size);

  // Until cleared (seconds 0), every wait for a peer (allGather, barrier, recv) gives up after
  // `seconds` from now with ncclRemoteError, WARNing which rank it waited for and that it was
  // during `what` (ACCL_INIT_TIMEOUT for the transport setup after the rendezvous).
  void setDeadline(int64_t seconds, const std::string& what);

  // Liveness: the ring neighbours' sockets close when they exit or abort. Returns the first
  // neighbour that died or failed, or -1. Non-blocking. *culprit (optional) receives the rank
  // whose loss started the failure: the neighbour itself for a bare EOF (a killed process),
  // or the rank named in the neighbour's failure notice (see closeRing).
  int closedNeighbour(int* culprit = nullptr) const;
  // File descriptors a waiting thread may poll for neighbour EOF.
  std::vector<int> neighbourFds() const;
  // Shuts down all sockets so blocked calls return and neighbours see EOF.
  void abort();
  // Shuts down only the ring connections, after a failure notice naming `culprit` (the rank
  // whose loss started it; -1 if unknown): neighbours see it and EOF, cascade the failure and
  // can name the lost rank. The listener keeps serving send/recv for ncclCommShrink.
  void closeRing(int culprit);

  struct Impl;
 private:
  explicit Bootstrap(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace accl
