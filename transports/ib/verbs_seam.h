// verbs_seam.h: the few verbs operations the IB data path needs, behind one small abstract
// class so the protocol (transports/ib/ib_channel.h) is unit-tested with an in-process fake
// device (tests/unit/ib_fake_verbs.h) on machines without RDMA hardware. Objects are named
// by plain handles (PD, CQ, MR ids; QPs by their QPN) so the fake needs no verbs structs.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "nccl.h"

namespace accl::ib {

using Gid = std::array<uint8_t, 16>;

enum class GidType { IbOrRoceV1, RoceV2 };
struct GidEntry {
  int index = 0;
  Gid gid{};
  GidType type = GidType::IbOrRoceV1;
};

struct PortInfo {
  uint16_t lid = 0;
  bool ethernet = false;  // RoCE: addressed by GID, LID unused
  int mtu = 4096;
  bool active = true;  // IBV_PORT_ACTIVE: a port that went down is asked again later
};

struct MrKeys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// Reset and Error are legal from every state; Init only from Reset (a QP in the error state is
// reset before it is brought up again), Rtr from Init, Rts from Rtr.
enum class QpState { Reset, Init, Rtr, Rts, Error };

// Everything modify-QP needs for one transition; fields not used by a state are ignored.
struct QpAttrs {
  uint32_t remoteQpn = 0;
  uint32_t remotePsn = 0;  // RTR: expected receive PSN
  uint32_t localPsn = 0;   // RTS: send PSN
  uint16_t dlid = 0;
  bool global = false;  // GRH (RoCE, or IB across subnets)
  Gid dgid{};
  int sgidIndex = 0;
  int mtu = 4096;
  uint8_t timeout = 0;   // NCCL_IB_TIMEOUT: local ACK timeout exponent
  uint8_t retryCnt = 0;  // NCCL_IB_RETRY_CNT
  uint8_t rnrRetry = 7;
};

struct WorkCompletion {
  uint64_t wrId = 0;
  bool ok = true;
  std::string status;  // ibv_wc_status_str() text when !ok
  bool isRecv = false;
  bool hasImm = false;
  uint32_t imm = 0;
};

class Verbs {
 public:
  virtual ~Verbs() = default;
  virtual ncclResult_t queryPort(PortInfo* out) = 0;
  virtual ncclResult_t queryGids(std::vector<GidEntry>* out) = 0;
  virtual ncclResult_t allocPd(uint64_t* pd) = 0;
  virtual ncclResult_t regMr(uint64_t pd, void* addr, size_t size, uint64_t* mr, MrKeys* keys) = 0;
  virtual ncclResult_t deregMr(uint64_t mr) = 0;
  virtual ncclResult_t createCq(int depth, uint64_t* cq) = 0;
  virtual ncclResult_t createQp(uint64_t pd, uint64_t cq, uint32_t* qpn) = 0;
  virtual ncclResult_t modifyQp(uint32_t qpn, QpState state, const QpAttrs& attrs) = 0;
  // RDMA write of [local, local+len) to the peer's (remote, rkey); withImm consumes one posted
  // receive there and delivers `imm` in its completion.
  virtual ncclResult_t postWrite(uint32_t qpn, uint64_t wrId, const void* local, uint32_t lkey, size_t len,
                                 uint64_t remote, uint32_t rkey, bool withImm, uint32_t imm) = 0;
  virtual ncclResult_t postRecv(uint32_t qpn, uint64_t wrId) = 0;
  virtual ncclResult_t pollCq(uint64_t cq, std::vector<WorkCompletion>* out) = 0;
};

}  // namespace accl::ib
