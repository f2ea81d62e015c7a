// shm_transport.h: connections between ranks of one host through shared memory.
// Each rank creates one anonymous segment (memfd: it has no name, so nothing is left in
// /dev/shm whatever happens to the process) holding its doorbell and one inbound byte ring per
// peer. The file is sparse: a ring costs memory only for the pages traffic touches. A rank
// connects to a peer when it first sends to or receives from it, on its own: it maps the
// peer's segment through /proc/<pid>/fd/<fd> (the slot the peer reads from this rank) and
// reads its own slot for that peer, so no handshake is needed and both ends may connect in
// either order. A sender writes straight into the receiver's ring: a transfer is one copy in
// and one copy (or fused reduction) out, with no syscall unless a side sleeps.
#pragma once
#include <memory>
#include <vector>
#include "transports/doorbell.h"
#include "transports/setup.h"

namespace accl {

class ShmTransport final : public Transport {
 public:
  ShmTransport();
  ~ShmTransport() override;
  const char* name() const override { return "SHM"; }
  ncclResult_t publish(TransportSetup& ctx, PeerInfo* me) override;
  Doorbell* sharedBell() override;
  bool canConnect(const PeerInfo& me, const PeerInfo& peer) const override;
  ncclResult_t setup(TransportSetup&, const std::vector<int>&) override { return ncclSuccess; }
  ncclResult_t connect(TransportSetup& ctx, int peer, std::unique_ptr<PeerConnection>* out) override;
  // True once publish made this rank's segment (shared memory is enabled and works).
  bool active() const { return own_ != nullptr; }
  RingMemory ringMemory() const override { return RingMemory::HostShared; }
  void depart() override;

  // Bytes of memory this rank's segment holds now (pages touched), for tests and INFO.
  size_t residentBytes() const;

  struct Mapping;

 private:
  ncclResult_t departedPeer(int peer, std::unique_ptr<PeerConnection>* out);
  std::unique_ptr<Mapping> own_;  // this rank's whole segment
  int fd_ = -1;
  size_t ringBytes_ = 0;
  int nranks_ = 0;
};

}  // namespace accl
