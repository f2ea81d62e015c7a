// shm_transport.h: connections between ranks of one host through POSIX shared memory.
// Each rank creates one segment holding its doorbell and one inbound byte ring per local
// peer; a sender writes straight into the receiver's ring, so a transfer is one copy in and
// one copy (or fused reduction) out, with no syscall unless a side sleeps.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "transports/doorbell.h"
#include "transports/transport.h"

namespace accl {

class ShmDomain {
 public:
  // Creates and pre-faults this rank's segment: `nLocal` inbound rings of `ringBytes`
  // (a power of two). `nameBase` must be unique per communicator.
  static ncclResult_t create(const std::string& nameBase, int myLocal, int nLocal, size_t ringBytes,
                             std::unique_ptr<ShmDomain>* out);
  ~ShmDomain();

  // Maps the segments of every other local rank (they must all exist: call after a barrier).
  ncclResult_t attachPeers();
  // Removes the names from /dev/shm once every peer has mapped them (mappings stay valid).
  void unlinkOwn();

  // Connection to local peer `peerLocal`, whose global rank is `peerRank` (for messages).
  std::unique_ptr<PeerConnection> connect(int peerLocal, int peerRank);
  Doorbell* bell();

  struct Segment;
 private:
  ShmDomain() = default;
  std::string segmentName(int local) const;
  std::string nameBase_;
  int myLocal_ = 0;
  int nLocal_ = 0;
  size_t ringBytes_ = 0;
  std::vector<std::unique_ptr<Segment>> segments_;  // index = local rank
};

}  // namespace accl
