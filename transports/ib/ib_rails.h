// ib_rails.h: one direction of an IB connection striped over several ports ("rails": the
// active ports NCCL_IB_HCA admits, at most ACCL_IB_RAILS), which keeps going when a port's QPs
// go to the error state. Each rail is an IbQpSet on its own port (its own verbs context, PD,
// CQ and NCCL_IB_QPS_PER_CONNECTION QPs); the lanes are all their QPs, rail by rail.
//
// A message is cut into one piece per lane. Each piece is an RDMA write with immediate whose
// immediate names the message's slot, the piece and its size, so the receiver counts every
// piece once, whichever lane brought it. Receives are a pool per lane, topped up as they are
// used, so a piece may land on any live lane. A credit carries the receive buffer's rkey on
// every rail.
//
// Failover: an error completion on a lane (a write that failed, a receive flushed because the
// QP went to the error state) drops that lane's rail. A WARN names the port, the QP, the peer
// and the port the work moves to; every piece that was on the rail and not yet confirmed is
// written again on a live lane (same bytes, same place), and a credit whose write failed is
// written again too. Only when no rail is left does the channel fail, as with one port.
// A dropped rail is taken back into use once its port is active again on both ends
// (ib_rail_return.h, every ACCL_RAIL_RETRY_SEC).
// Known limit: on real hardware a write can land although its completion reports an error
// (lost acknowledgements); its piece then arrives twice and is counted once, but a copy that
// arrives after the message has completed is not told apart (never seen on the fake fabric).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "transports/ib/ib_channel.h"

namespace accl::ib {

inline constexpr int kIbMaxRails = 4;
// Immediate of a piece: slot (3 bits) | piece (4 bits) | bytes (25 bits).
inline constexpr uint32_t kIbMaxPieceBytes = (1u << 25) - 1;
inline uint32_t encodePieceImm(uint64_t seq, int piece, uint32_t bytes) {
  return static_cast<uint32_t>(seq % kIbMaxInflight) << 29 | static_cast<uint32_t>(piece) << 25 | bytes;
}
inline int pieceImmSlot(uint32_t imm) { return static_cast<int>(imm >> 29); }
inline int pieceImmPiece(uint32_t imm) { return static_cast<int>((imm >> 25) & 0xf); }
inline uint32_t pieceImmBytes(uint32_t imm) { return imm & kIbMaxPieceBytes; }
static_assert(kIbMaxInflight == 8 && kMaxQpsPerConn <= 16, "the piece immediate holds 3 slot and 4 piece bits");

struct IbRailCredit {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t seq = 0;  // message number + 1; 0 = slot empty
  uint32_t rkey[kIbMaxRails] = {};
};

// The rails of one connection and which of them still work.
class IbRailSet {
 public:
  struct Rail {
    IbQpSet* qps;      // owned by the connection
    std::string name;  // "mlx5_1:1"
  };
  IbRailSet(std::vector<Rail> rails, std::string peer);
  // Uses only the first n rails (the peer has fewer); before any traffic.
  void use(int n);
  int rails() const { return static_cast<int>(rails_.size()); }
  int lanes() const { return rails() * perRail_; }
  int railOf(int lane) const { return lane / perRail_; }
  uint32_t qpnOf(int lane) const { return rails_[railOf(lane)].qps->qpns()[lane % perRail_]; }
  IbQpSet& rail(int r) { return *rails_[r].qps; }
  const std::string& name(int r) const { return rails_[r].name; }
  bool live(int r) const { return live_[r]; }
  const std::string& peer() const { return peer_; }
  // `lane` if its rail is live, else the next lane of a live rail; -1 when none is left.
  int liveLane(int lane) const;
  // An error completion `status` on `lane`: its rail is dropped (WARN once, naming port, QP,
  // peer and where the work goes). False once no rail is left; error() then says why.
  bool drop(int lane, const std::string& status);
  const std::string& error() const { return error_; }
  // Taking a rail out of use without an error (the peer moved its work off it) and back in.
  void retire(int r, const std::string& why);
  void revive(int r) { live_[r] = error_.empty(); }
  int liveRails() const;
  std::string liveNames() const;  // "mlx5_0:1, mlx5_1:1"

 private:
  std::vector<Rail> rails_;
  std::vector<bool> live_;
  std::vector<std::string> why_;  // per rail: why it was last taken out of use
  int perRail_ = 1;
  std::string peer_;
  std::string error_;
};

// Request ids are message numbers; -1 from isend/irecv means "try again later".
class IbRailSender {
 public:
  explicit IbRailSender(IbRailSet& rails) : rails_(rails) {}
  ~IbRailSender();
  IbRailSender(const IbRailSender&) = delete;
  IbRailSender& operator=(const IbRailSender&) = delete;
  // Registers the credit FIFO on every rail and records it in each rail's `local` record.
  ncclResult_t init(std::vector<QpInfo>* local);
  // `lkeys`: the source buffer's lkey on each rail.
  ncclResult_t isend(const void* data, size_t size, const uint32_t* lkeys, int64_t* req);
  ncclResult_t test(int64_t req, bool* done, size_t* size);
  const std::string& error() const { return rails_.error(); }
  // No write of this side is outstanding on rail r: its QPs may be reset.
  bool quiet(int r) const;
  // Largest message: every piece's size must fit its immediate.
  size_t maxBytes() const { return static_cast<size_t>(rails_.lanes()) * kIbMaxPieceBytes; }

 private:
  struct Slot {
    uint64_t seq = 0;
    uint32_t open = 0;   // bit per piece not yet confirmed (0: the message is done)
    size_t size = 0;
    const char* data = nullptr;
    uint64_t remote = 0;
    uint32_t lkey[kIbMaxRails] = {};
    uint32_t rkey[kIbMaxRails] = {};
    int8_t lane[kMaxQpsPerConn] = {};  // per piece: the lane its write is on
  };
  ncclResult_t progress();
  // Writes `piece` of the slot's message on `lane` (or the next live one if it refuses).
  ncclResult_t post(Slot& slot, int piece, int lane);
  IbRailSet& rails_;
  std::unique_ptr<IbRailCredit[]> fifo_;
  std::vector<std::pair<Verbs*, uint64_t>> fifoMrs_;
  uint64_t next_ = 0;
  Slot slots_[kIbMaxInflight];
};

class IbRailReceiver {
 public:
  explicit IbRailReceiver(IbRailSet& rails) : rails_(rails) {}
  ~IbRailReceiver();
  IbRailReceiver(const IbRailReceiver&) = delete;
  IbRailReceiver& operator=(const IbRailReceiver&) = delete;
  // `remote`: the sender's records (its credit FIFO on each rail). Posts the receive pools.
  ncclResult_t init(const std::vector<QpInfo>& remote);
  // `rkeys`: the destination buffer's rkey on each rail.
  ncclResult_t irecv(void* data, size_t size, const uint32_t* rkeys, int64_t* req);
  ncclResult_t test(int64_t req, bool* done, size_t* size);
  const std::string& error() const { return rails_.error(); }
  // No receive or credit of this side is outstanding on rail r: its QPs may be reset.
  bool quiet(int r) const;
  // Posts the receive pool on every lane of rail r (its QPs just came back to INIT).
  ncclResult_t refill(int r);

 private:
  struct Slot {
    uint64_t seq = 0;
    int pieces = 0;     // not yet arrived
    uint32_t seen = 0;  // bit per piece that arrived
    bool creditPending = false;
    int creditLane = 0;  // where the credit write is
    size_t bytes = 0;
  };
  ncclResult_t progress();
  ncclResult_t postCredit(uint64_t seq, int lane);
  ncclResult_t postPool(int lane);
  IbRailSet& rails_;
  uint64_t fifoAddr_ = 0;
  uint32_t fifoRkey_[kIbMaxRails] = {};
  std::unique_ptr<IbRailCredit[]> staging_;
  std::vector<std::pair<Verbs*, uint64_t>> stagingMrs_;
  uint32_t stagingLkey_[kIbMaxRails] = {};
  int pool_[kMaxQpsPerConn] = {};  // per lane: receives posted and not yet completed
  uint64_t next_ = 0;
  Slot slots_[kIbMaxInflight];
};

}  // namespace accl::ib
