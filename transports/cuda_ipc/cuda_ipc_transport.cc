#include "transports/cuda_ipc/cuda_ipc_transport.h"
#include <cstring>
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "collective_args.h"
#include "device/deferred_release.h"

namespace accl {
namespace {

// The shm connection (control) plus the peer's mapped device memory it writes into.
class CudaIpcConnection final : public PeerConnection {
 public:
  CudaIpcConnection(std::unique_ptr<PeerConnection> control, dev::Buffer peerRings)
      : control_(std::move(control)), peerRings_(std::move(peerRings)) {}
  ~CudaIpcConnection() override { control_.reset(); }  // before unmapping the peer's rings
  SendChannel* send() override { return control_->send(); }
  RecvChannel* recv() override { return control_->recv(); }
  void close(int culprit) override { control_->close(culprit); }
  void depart(int myRank) override { control_->depart(myRank); }
  int reportedCulprit() const override { return control_->reportedCulprit(); }
  int closedByPeer() const override { return control_->closedByPeer(); }
  const char* transportName() const override { return "CUDA IPC"; }
  void ownerSleeps(bool asleep) override { control_->ownerSleeps(asleep); }

 private:
  std::unique_ptr<PeerConnection> control_;
  dev::Buffer peerRings_;  // empty when the peer is in this process
};

}  // namespace

CudaIpcTransport::CudaIpcTransport(ShmTransport& shm, std::shared_ptr<dev::Backend> backend)
    : shm_(shm), backend_(std::move(backend)) {}

CudaIpcTransport::~CudaIpcTransport() {
  // cuMemFree waits for the whole device: after an abort or a failure, work may still be queued
  // on a stream that waits for something that will come only after the abort returns (a
  // held user stream). Then the rings are freed by a helper thread once the device lets them go.
  if (!departed_ && rings_.get() != nullptr) {
    INFO(kSubsysInit, "CUDA IPC: communicator aborted or failed: its device rings (%zu bytes) are freed in the "
         "background once the device's streams have drained", ringBytes_);
    dev::releaseLater(backend_, std::move(rings_));
  }
}

ncclResult_t CudaIpcTransport::publish(TransportSetup& ctx, PeerInfo* me) {
  me->deviceRingAddr = 0;
  std::memset(me->deviceHandle, 0, sizeof(me->deviceHandle));
  me->deviceId = backend_ ? backend_->deviceId() : 0;
  if (me->deviceId == 0 || ctx.nranks < 2) return ncclSuccess;  // host buffers: shm as always
  if (param::p2pDisable() != 0) {
    INFO(kSubsysInit, "rank %d: NCCL_P2P_DISABLE=1: no CUDA IPC rings; ranks on this host use shared memory",
         ctx.rank);
    return ncclSuccess;
  }
  if (param::shmDisable() != 0) return ncclSuccess;  // the rings' control lives in shm's segment
  // Communicators the collective kernels serve (comm/kernel_path.h) never use these rings: their
  // kernels move the data through mailboxes. Should the kernel path not be set up after all,
  // ranks of one device use shared memory instead.
  if (backend_->runsCollectiveKernels() && ctx.nranks <= kern::kMailboxRanks) {
    INFO(kSubsysInit, "rank %d: no CUDA IPC rings: the collective kernels move the data", ctx.rank);
    return ncclSuccess;
  }
  ringBytes_ = ctx.ringBytes;
  dev::SharedHandle handle{};
  if (backend_->allocShared(static_cast<size_t>(ctx.nranks) * ringBytes_, &rings_, &handle) != ncclSuccess) {
    WARN("rank %d: cannot allocate %d device rings of %zu bytes for CUDA IPC; ranks on this host use shared memory "
         "(staged through host memory)",
         ctx.rank, ctx.nranks, ringBytes_);
    rings_ = {};
    return ncclSuccess;
  }
  static_assert(sizeof(handle.bytes) == sizeof(me->deviceHandle));
  std::memcpy(me->deviceHandle, handle.bytes, sizeof(me->deviceHandle));
  me->deviceRingAddr = reinterpret_cast<uint64_t>(rings_.get());
  INFO(kSubsysInit, "rank %d: CUDA IPC: %d device rings of %zu bytes", ctx.rank, ctx.nranks, ringBytes_);
  return ncclSuccess;
}

bool CudaIpcTransport::canConnect(const PeerInfo& me, const PeerInfo& peer) const {
  // Same device only: rings of another device would need peer access (P2P), not checked yet.
  return rings_.get() != nullptr && me.deviceRingAddr != 0 && peer.deviceRingAddr != 0 && me.deviceId != 0 &&
         me.deviceId == peer.deviceId && me.hostHash == peer.hostHash && shm_.canConnect(me, peer);
}

ncclResult_t CudaIpcTransport::connect(TransportSetup& ctx, int peer, std::unique_ptr<PeerConnection>* out) {
  const PeerInfo& me = ctx.me();
  const PeerInfo& info = (*ctx.peers)[peer];
  dev::Buffer peerRings;
  char* peerBase = reinterpret_cast<char*>(info.deviceRingAddr);
  if (info.pid != me.pid || info.pidNs != me.pidNs) {
    dev::SharedHandle h{};
    std::memcpy(h.bytes, info.deviceHandle, sizeof(h.bytes));
    if (backend_->openShared(h, &peerRings) != ncclSuccess) {
      WARN("rank %d: cannot map the device rings of %s (CUDA IPC): the process is gone or left", ctx.rank,
           ctx.describePeer(peer).c_str());
      return ncclRemoteError;
    }
    peerBase = peerRings.get();
  }
  char* sendData = peerBase + static_cast<size_t>(ctx.rank) * ringBytes_;
  char* recvData = rings_.get() + static_cast<size_t>(peer) * ringBytes_;
  std::unique_ptr<PeerConnection> control;
  NCCLCHECK(shm_.connectData(ctx, peer, sendData, recvData, "CUDA IPC", &control));
  *out = std::make_unique<CudaIpcConnection>(std::move(control), std::move(peerRings));
  return ncclSuccess;
}

}  // namespace accl
