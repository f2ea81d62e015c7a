// setup.h: how a communicator chooses and sets up transports (the per-peer transport table).
// Init builds an ordered list of transports (today: shared memory, then the network; later a
// device transport such as CUDA IPC goes first) and walks it for every peer: the first
// transport that says it can connect the pair, from what both ranks published, carries it.
// Transports sit below the communicator (src/comm), so they see it through TransportSetup.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "bootstrap/bootstrap.h"
#include "topo/cpu_mask.h"
#include "topo/ifaces.h"
#include "topo/nic_choice.h"
#include "transports/peer_info.h"
#include "transports/transport.h"

namespace accl {

struct Doorbell;

struct TransportSetup {
  int rank = 0;
  int nranks = 0;
  uint64_t nonce = 0;                            // names this communicator (rank 0's commNonce)
  Bootstrap* bootstrap = nullptr;                // out-of-band messages to peers
  const std::vector<PeerInfo>* peers = nullptr;  // everyone's published record, by rank
  std::atomic<int>* abortFlag = nullptr;         // non-zero: give up (ncclCommAbort)
  size_t ringBytes = 0;                          // capacity of each direction's byte ring
  Doorbell* bell = nullptr;                      // rung when data or space for this rank appears
  const topo::NetIf* dataIf = nullptr;           // the interface chosen for data between hosts
  const std::vector<topo::NetIf>* rails = nullptr;  // its rails (topo::railsOf; null: dataIf alone)
  std::string netName;                           // NCCL_NET / config.netName ("" = any)
  const topo::CpuMask* helperCpus = nullptr;     // where helper threads run (null/empty: anywhere)
  const topo::RankLocality* locality = nullptr;  // the rank's GPU and NUMA node (null: unknown)
  // Where eager transports put the connections they make in setup(), by peer rank.
  std::vector<std::unique_ptr<PeerConnection>>* conns = nullptr;

  const PeerInfo& me() const { return (*peers)[rank]; }
  std::string describePeer(int peer) const { return accl::describePeer(*peers, peer); }
};

// Where a transport's byte rings live: a device backend must know whether its kernels can
// read and write them directly.
enum class RingMemory {
  HostPrivate,  // this process's heap; helper threads move the bytes (sockets, net plugins)
  HostShared,   // host memory mapped by both ranks (shared memory)
  Device,       // device memory (a device transport such as CUDA IPC)
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Before peer information is exchanged: create what peers will need and describe it in
  // `me` (addresses, handles). Every rank calls this for every transport of the list.
  virtual ncclResult_t publish(TransportSetup& ctx, PeerInfo* me) = 0;
  // The doorbell peers of this transport ring for this rank, if it must live in memory they
  // share (the communicator then uses it for every transport); null if none.
  virtual Doorbell* sharedBell() { return nullptr; }
  // From what both ranks published: can this transport connect them?
  virtual bool canConnect(const PeerInfo& me, const PeerInfo& peer) const = 0;
  // Collective: every rank calls it, in list order, with the peers this transport was chosen
  // for (possibly none). An eager transport connects them all here (into ctx.conns).
  virtual ncclResult_t setup(TransportSetup& ctx, const std::vector<int>& peers) = 0;
  // A lazy transport makes the connection to `peer` here, when it is first used; one-sided:
  // the peer makes its own end whenever it first needs it, with no handshake.
  virtual ncclResult_t connect(TransportSetup& ctx, int peer, std::unique_ptr<PeerConnection>* out) = 0;
  virtual RingMemory ringMemory() const = 0;
  // ncclCommDestroy, work done: lets peers that connected to us but that we never connected
  // to see that we left (PeerConnection::depart covers the pairs we did connect).
  virtual void depart() {}
};

}  // namespace accl
