// net_connection.h: the byte-ring adapter over a net module. Each direction of a peer
// connection is a ring of kNetSlots equal slots in registered memory; one commit on the
// send side becomes one message (isend of that slot), and the receiver keeps a receive posted
// on every free slot, so messages land in the slot the sender used and the stream stays in
// order without framing. A per-communicator NetWorker thread makes every module call after
// connect (isend/irecv/test), so the executor only touches memory and its doorbell, exactly
// as with the socket transport.
#pragma once
#include <memory>
#include <string>
#include "topo/cpu_mask.h"
#include "transports/doorbell.h"
#include "transports/net/net_module.h"
#include "transports/transport.h"

namespace accl::net {

inline constexpr int kNetSlots = 8;  // messages in flight per direction (NCCL_STEPS)

class NetWorker;
// One per communicator; rings `bell` whenever data arrives or send slots free up. Its thread
// runs on `cpus` (empty: anywhere).
std::shared_ptr<NetWorker> makeNetWorker(Doorbell* bell, int rank, const topo::CpuMask& cpus);

// The comms are connected (connect/accept returned them). Registers both rings (regMr) and
// hands all further module calls to `worker`. `peer` names the other end in error messages.
ncclResult_t makeNetConnection(const std::shared_ptr<NetWorker>& worker, NetModule* module, void* sendComm,
                               void* recvComm, size_t ringBytes, std::string peer,
                               std::unique_ptr<PeerConnection>* out);

}  // namespace accl::net
