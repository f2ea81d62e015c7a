// cuda_ipc_transport.h: rings in device memory between ranks of one host that drive the same
// device (several ranks per GPU). Each rank allocates its inbound rings (one per peer) in device
// memory through its backend and publishes a CUDA IPC handle to them; a sender writes into the
// receiver's ring with device copies and reduction kernels (device to device, no staging
// through host memory). Only the ring DATA is on the device: the counters, doorbells and
// departure notices stay in the shared-memory segment of the shm transport, so the host-side
// lanes poll them exactly as for shm, and a peer that leaves is named the same way.
// Chosen before shm; needs shm's segment (NCCL_SHM_DISABLE=1 turns it off too) and is turned
// off by NCCL_P2P_DISABLE=1.
#pragma once
#include <memory>
#include <vector>
#include "device/backend.h"
#include "transports/setup.h"
#include "transports/shm/shm_transport.h"

namespace accl {

class CudaIpcTransport final : public Transport {
 public:
  // `shm` is the communicator's shm transport (it outlives this one's connections);
  // `backend` the communicator's device backend.
  CudaIpcTransport(ShmTransport& shm, std::shared_ptr<dev::Backend> backend);
  ~CudaIpcTransport() override;
  const char* name() const override { return "CUDA IPC"; }
  ncclResult_t publish(TransportSetup& ctx, PeerInfo* me) override;
  bool canConnect(const PeerInfo& me, const PeerInfo& peer) const override;
  ncclResult_t setup(TransportSetup&, const std::vector<int>&) override { return ncclSuccess; }
  ncclResult_t connect(TransportSetup& ctx, int peer, std::unique_ptr<PeerConnection>* out) override;
  RingMemory ringMemory() const override { return RingMemory::Device; }
  void depart() override { departed_ = true; }

 private:
  ShmTransport& shm_;
  std::shared_ptr<dev::Backend> backend_;  // declared before rings_: frees them
  dev::Buffer rings_;                      // this rank's inbound rings, one per writer rank
  size_t ringBytes_ = 0;
  bool departed_ = false;  // ncclCommDestroy with all work done (not abort or failure)
};

}  // namespace accl
