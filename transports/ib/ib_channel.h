// ib_channel.h: one direction of an IB connection, over the verbs seam. The receiver posts a
// buffer by writing a credit (its address, rkey, size) into the sender's credit FIFO with an
// RDMA write; the sender waits for that credit (no overrun), then RDMA-writes the message
// with immediate data, split across NCCL_IB_QPS_PER_CONNECTION QPs; each immediate carries
// its piece's size, so the receiver learns the message size from its completions.
// A completion with an error fails the channel with a message naming the peer (error(); the
// owner logs it); every later call reports the same error (a dead peer is a clean error,
// never a hang).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "transports/ib/ib_setup.h"

namespace accl::ib {

inline constexpr int kIbMaxInflight = 8;

struct IbCredit {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t rkey = 0;
  uint32_t pad = 0;
  uint64_t seq = 0;  // message number + 1; 0 = slot empty
};

// What both directions share: the device, its PD and CQ, the QPs, and the handshake record.
class IbQpSet {
 public:
  IbQpSet(Verbs& verbs, const IbConfig& cfg, std::string peer) : verbs_(verbs), cfg_(cfg), peer_(std::move(peer)) {}
  // Opens PD/CQ/QPs and fills `local` (to send to the peer) with QPNs, PSN, LID/GID.
  ncclResult_t create(uint32_t psn, QpInfo* local);
  // INIT -> RTR -> RTS of every QP against the peer's record.
  ncclResult_t connect(const QpInfo& local, const QpInfo& remote);
  // One transition of every QP, silently (the caller says what failed): how a port that came
  // back is brought into use again, Reset -> Init -> Rtr -> Rts with the first exchange's records.
  ncclResult_t moveAll(QpState state, const QpInfo& local, const QpInfo& remote);
  Verbs& verbs() { return verbs_; }
  uint64_t pd() const { return pd_; }
  uint64_t cq() const { return cq_; }
  const std::vector<uint32_t>& qpns() const { return qpns_; }
  const std::string& peer() const { return peer_; }
  const IbConfig& config() const { return cfg_; }

 private:
  Verbs& verbs_;
  IbConfig cfg_;
  std::string peer_;
  uint64_t pd_ = 0, cq_ = 0;
  int sgid_ = 0;
  std::vector<uint32_t> qpns_;
};

// Request ids are message numbers; -1 from isend/irecv means "try again later".
class IbSender {
 public:
  explicit IbSender(IbQpSet& qps) : qps_(qps) {}
  ~IbSender();
  IbSender(const IbSender&) = delete;
  IbSender& operator=(const IbSender&) = delete;
  // Registers the credit FIFO and records it in `local` for the receiver.
  ncclResult_t init(QpInfo* local);
  ncclResult_t isend(const void* data, size_t size, uint32_t lkey, int64_t* req);
  ncclResult_t test(int64_t req, bool* done, size_t* size);
  const std::string& error() const { return error_; }

 private:
  ncclResult_t progress();
  IbQpSet& qps_;
  std::unique_ptr<IbCredit[]> fifo_;
  uint64_t fifoMr_ = 0;
  uint64_t next_ = 0;
  struct Slot { uint64_t seq = 0; int pending = 0; size_t size = 0; } slots_[kIbMaxInflight];
  std::string error_;
};

class IbReceiver {
 public:
  explicit IbReceiver(IbQpSet& qps) : qps_(qps) {}
  ~IbReceiver();
  IbReceiver(const IbReceiver&) = delete;
  IbReceiver& operator=(const IbReceiver&) = delete;
  // `remote` is the sender's record: where its credit FIFO lives.
  ncclResult_t init(const QpInfo& remote);
  ncclResult_t irecv(void* data, size_t size, uint32_t rkey, int64_t* req);
  ncclResult_t test(int64_t req, bool* done, size_t* size);
  const std::string& error() const { return error_; }

 private:
  ncclResult_t progress();
  IbQpSet& qps_;
  uint64_t fifoAddr_ = 0;
  uint32_t fifoRkey_ = 0;
  std::unique_ptr<IbCredit[]> staging_;
  uint64_t stagingMr_ = 0;
  uint32_t stagingLkey_ = 0;
  uint64_t next_ = 0;
  struct Slot { uint64_t seq = 0; int pending = 0; size_t bytes = 0; } slots_[kIbMaxInflight];
  std::string error_;
};

}  // namespace accl::ib
