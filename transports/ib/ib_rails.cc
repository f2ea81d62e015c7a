// ib_rails.cc: the striped, failing-over IB channel (see ib_rails.h).
#include "transports/ib/ib_rails.h"
#include <algorithm>
#include "base/check.h"
#include "base/log.h"

namespace accl::ib {
namespace {

constexpr uint64_t kCreditWr = 1ull << 61;  // receiver: a credit write (low bits: message number)
constexpr uint64_t kPoolWr = 1ull << 62;    // receiver: a pool receive (low bits: lane)
constexpr int kPieceBits = 4;               // sender: wrId = message number << 4 | piece

}  // namespace

IbRailSet::IbRailSet(std::vector<Rail> rails, std::string peer)
    : rails_(std::move(rails)), live_(rails_.size(), true), why_(rails_.size()), peer_(std::move(peer)) {
  perRail_ = rails_.empty() ? 1 : std::max<int>(1, static_cast<int>(rails_[0].qps->qpns().size()));
}

void IbRailSet::use(int n) {
  if (n >= 1 && n < rails()) {
    rails_.resize(static_cast<size_t>(n));
    live_.resize(static_cast<size_t>(n));
    why_.resize(static_cast<size_t>(n));
  }
}

void IbRailSet::retire(int r, const std::string& why) {
  live_[r] = false;
  why_[r] = why;
}

int IbRailSet::liveRails() const {
  int n = 0;
  for (int r = 0; r < rails(); r++) n += live_[r];
  return n;
}

std::string IbRailSet::liveNames() const {
  std::string out;
  for (int r = 0; r < rails(); r++)
    if (live_[r]) out += (out.empty() ? "" : ", ") + rails_[r].name;
  return out;
}

int IbRailSet::liveLane(int lane) const {
  const int n = lanes();
  for (int i = 0; i < n; i++) {
    const int l = (lane + i) % n;
    if (live_[railOf(l)]) return l;
  }
  return -1;
}

bool IbRailSet::drop(int lane, const std::string& status) {
  const int r = railOf(lane);
  if (live_[r]) {
    live_[r] = false;
    why_[r] = status;
    const int next = liveLane(lane);
    if (next < 0) {
      // The owner logs it, as for one port: a peer that died takes every rail down at once.
      std::string lost;
      for (int i = 0; i < rails(); i++) lost += (i ? ", " : "") + rails_[i].name + " (" + why_[i] + ")";
      error_ = "IB completion error with peer " + peer_ + " on every port: " + lost;
      return false;
    }
    WARN("NET/IB: QP %u on %s to peer %s went to the error state (%s); its work continues on %s", qpnOf(lane),
         rails_[r].name.c_str(), peer_.c_str(), status.c_str(), rails_[railOf(next)].name.c_str());
  }
  return error_.empty();
}

// ---- sender ---------------------------------------------------------------------------------

IbRailSender::~IbRailSender() {
  for (auto& [verbs, mr] : fifoMrs_) verbs->deregMr(mr);
}

ncclResult_t IbRailSender::init(std::vector<QpInfo>* local) {
  fifo_ = std::make_unique<IbRailCredit[]>(kIbMaxInflight);
  for (int r = 0; r < rails_.rails(); r++) {
    MrKeys keys;
    uint64_t mr = 0;
    if (rails_.rail(r).verbs().regMr(rails_.rail(r).pd(), fifo_.get(), sizeof(IbRailCredit) * kIbMaxInflight, &mr,
                                     &keys) != ncclSuccess)
      return ncclSystemError;
    fifoMrs_.push_back({&rails_.rail(r).verbs(), mr});
    (*local)[static_cast<size_t>(r)].fifoAddr = reinterpret_cast<uintptr_t>(fifo_.get());
    (*local)[static_cast<size_t>(r)].fifoRkey = keys.rkey;
  }
  return ncclSuccess;
}

ncclResult_t IbRailSender::post(Slot& slot, int piece, int lane) {
  const size_t lanes = static_cast<size_t>(rails_.lanes());
  const size_t chunk = (slot.size + lanes - 1) / lanes;
  const size_t off = std::min(static_cast<size_t>(piece) * chunk, slot.size);
  const size_t len = std::min(chunk, slot.size - off);
  for (;;) {
    if (lane < 0) return ncclRemoteError;
    const int r = rails_.railOf(lane);
    slot.lane[piece] = static_cast<int8_t>(lane);
    if (rails_.rail(r).verbs().postWrite(rails_.qpnOf(lane), slot.seq << kPieceBits | static_cast<uint64_t>(piece),
                                         slot.data + off, slot.lkey[r], len, slot.remote + off, slot.rkey[r], true,
                                         encodePieceImm(slot.seq, piece, static_cast<uint32_t>(len))) == ncclSuccess)
      return ncclSuccess;
    // The QP refused the post (it left RTS): as an error completion.
    if (!rails_.drop(lane, "posting a write failed")) return ncclRemoteError;
    lane = rails_.liveLane(lane);
  }
}

ncclResult_t IbRailSender::progress() {
  std::vector<WorkCompletion> wcs;
  for (int r = 0; r < rails_.rails(); r++) {
    if (rails_.rail(r).verbs().pollCq(rails_.rail(r).cq(), &wcs) != ncclSuccess) return ncclSystemError;
    for (const WorkCompletion& wc : wcs) {
      const uint64_t seq = wc.wrId >> kPieceBits;
      const int piece = static_cast<int>(wc.wrId & ((1u << kPieceBits) - 1));
      Slot& slot = slots_[seq % kIbMaxInflight];
      if (slot.seq != seq || !(slot.open & (1u << piece))) continue;
      if (wc.ok) {
        slot.open &= ~(1u << piece);
        continue;
      }
      // The piece did not get there: its rail is gone, it goes again on a live one.
      const int lane = slot.lane[piece];
      if (!rails_.drop(lane, wc.status)) return ncclRemoteError;
      if (ncclResult_t res = post(slot, piece, rails_.liveLane(lane)); res != ncclSuccess) return res;
    }
  }
  return rails_.error().empty() ? ncclSuccess : ncclRemoteError;
}

ncclResult_t IbRailSender::isend(const void* data, size_t size, const uint32_t* lkeys, int64_t* req) {
  *req = -1;
  if (ncclResult_t r = progress(); r != ncclSuccess) return r;
  const uint64_t seq = next_;
  Slot& slot = slots_[seq % kIbMaxInflight];
  volatile IbRailCredit* credit = &fifo_[seq % kIbMaxInflight];  // written by the peer's NIC
  if (credit->seq != seq + 1 || slot.open != 0) return ncclSuccess;  // no buffer posted yet
  if (size > credit->size || size > maxBytes()) {
    WARN("IB: message of %zu bytes to peer %s exceeds its posted receive of %llu bytes or the %zu-byte limit of %d "
         "lanes",
         size, rails_.peer().c_str(), static_cast<unsigned long long>(credit->size), maxBytes(), rails_.lanes());
    return ncclInvalidUsage;
  }
  slot = Slot{};
  slot.seq = seq;
  slot.size = size;
  slot.data = static_cast<const char*>(data);
  slot.remote = credit->addr;
  for (int r = 0; r < rails_.rails(); r++) {
    slot.rkey[r] = credit->rkey[r];
    slot.lkey[r] = lkeys[r];
  }
  credit->seq = 0;  // taken before writing: the next credit may land in this slot at once
  slot.open = (1u << rails_.lanes()) - 1;
  next_++;
  for (int piece = 0; piece < rails_.lanes(); piece++)
    if (ncclResult_t res = post(slot, piece, rails_.liveLane(piece)); res != ncclSuccess) return res;
  *req = static_cast<int64_t>(seq);
  return ncclSuccess;
}

ncclResult_t IbRailSender::test(int64_t req, bool* done, size_t* size) {
  *done = false;
  if (ncclResult_t r = progress(); r != ncclSuccess) return r;
  const Slot& slot = slots_[req % kIbMaxInflight];
  if (slot.seq == static_cast<uint64_t>(req) && slot.open == 0) {
    *done = true;
    if (size) *size = slot.size;
  }
  return ncclSuccess;
}

bool IbRailSender::quiet(int r) const {
  for (const Slot& slot : slots_)
    for (int piece = 0; piece < rails_.lanes(); piece++)
      if ((slot.open & (1u << piece)) && rails_.railOf(slot.lane[piece]) == r) return false;
  return true;
}

// ---- receiver -------------------------------------------------------------------------------

IbRailReceiver::~IbRailReceiver() {
  for (auto& [verbs, mr] : stagingMrs_) verbs->deregMr(mr);
}

ncclResult_t IbRailReceiver::postPool(int lane) {
  const int r = rails_.railOf(lane);
  if (rails_.rail(r).verbs().postRecv(rails_.qpnOf(lane), kPoolWr | static_cast<uint64_t>(lane)) != ncclSuccess)
    return ncclSystemError;
  pool_[lane]++;
  return ncclSuccess;
}

// As deep as init() makes it: after a failover every piece may come on one lane.
ncclResult_t IbRailReceiver::refill(int r) {
  const int depth = kIbMaxInflight * rails_.lanes();
  for (int lane = 0; lane < rails_.lanes(); lane++)
    for (int i = 0; i < depth && rails_.railOf(lane) == r; i++) NCCLCHECK(postPool(lane));
  return ncclSuccess;
}

bool IbRailReceiver::quiet(int r) const {
  for (int lane = 0; lane < rails_.lanes(); lane++)
    if (rails_.railOf(lane) == r && pool_[lane] > 0) return false;
  for (const Slot& slot : slots_)
    if (slot.creditPending && rails_.railOf(slot.creditLane) == r) return false;
  return true;
}

ncclResult_t IbRailReceiver::init(const std::vector<QpInfo>& remote) {
  fifoAddr_ = remote[0].fifoAddr;
  staging_ = std::make_unique<IbRailCredit[]>(kIbMaxInflight);
  for (int r = 0; r < rails_.rails(); r++) {
    fifoRkey_[r] = remote[static_cast<size_t>(r)].fifoRkey;
    MrKeys keys;
    uint64_t mr = 0;
    if (rails_.rail(r).verbs().regMr(rails_.rail(r).pd(), staging_.get(), sizeof(IbRailCredit) * kIbMaxInflight, &mr,
                                     &keys) != ncclSuccess)
      return ncclSystemError;
    stagingMrs_.push_back({&rails_.rail(r).verbs(), mr});
    stagingLkey_[r] = keys.lkey;
  }
  // Enough receives on every lane for every piece of every message in flight: after a
  // failover all of them may come on one lane.
  for (int r = 0; r < rails_.rails(); r++) NCCLCHECK(refill(r));
  return ncclSuccess;
}

ncclResult_t IbRailReceiver::postCredit(uint64_t seq, int lane) {
  Slot& slot = slots_[seq % kIbMaxInflight];
  for (;;) {
    if (lane < 0) return ncclRemoteError;
    const int r = rails_.railOf(lane);
    slot.creditLane = lane;
    if (rails_.rail(r).verbs().postWrite(rails_.qpnOf(lane), kCreditWr | seq, &staging_[seq % kIbMaxInflight],
                                         stagingLkey_[r], sizeof(IbRailCredit),
                                         fifoAddr_ + (seq % kIbMaxInflight) * sizeof(IbRailCredit), fifoRkey_[r],
                                         false, 0) == ncclSuccess)
      return ncclSuccess;
    if (!rails_.drop(lane, "posting a credit failed")) return ncclRemoteError;
    lane = rails_.liveLane(lane);
  }
}

ncclResult_t IbRailReceiver::progress() {
  std::vector<WorkCompletion> wcs;
  for (int r = 0; r < rails_.rails(); r++) {
    if (rails_.rail(r).verbs().pollCq(rails_.rail(r).cq(), &wcs) != ncclSuccess) return ncclSystemError;
    for (const WorkCompletion& wc : wcs) {
      if (wc.wrId & kPoolWr) {
        const int lane = static_cast<int>(wc.wrId & 0xff);
        pool_[lane]--;
        if (!wc.ok) {  // flushed: the QP went to the error state
          if (!rails_.drop(lane, wc.status)) return ncclRemoteError;
          continue;
        }
        if (wc.hasImm) {
          Slot& slot = slots_[pieceImmSlot(wc.imm)];
          const uint32_t bit = 1u << pieceImmPiece(wc.imm);
          if (slot.pieces > 0 && !(slot.seen & bit)) {  // a piece written twice counts once
            slot.seen |= bit;
            slot.bytes += pieceImmBytes(wc.imm);
            slot.pieces--;
          }
        }
        if (rails_.live(rails_.railOf(lane))) NCCLCHECK(postPool(lane));
      } else if (wc.wrId & kCreditWr) {
        const uint64_t seq = wc.wrId & ~kCreditWr;
        Slot& slot = slots_[seq % kIbMaxInflight];
        if (slot.seq != seq || !slot.creditPending) continue;
        if (wc.ok) {
          slot.creditPending = false;
          continue;
        }
        // The credit may not have landed: written again (the same bytes) on a live rail.
        if (!rails_.drop(slot.creditLane, wc.status)) return ncclRemoteError;
        if (ncclResult_t res = postCredit(seq, rails_.liveLane(slot.creditLane)); res != ncclSuccess) return res;
      }
    }
  }
  return rails_.error().empty() ? ncclSuccess : ncclRemoteError;
}

ncclResult_t IbRailReceiver::irecv(void* data, size_t size, const uint32_t* rkeys, int64_t* req) {
  *req = -1;
  if (ncclResult_t r = progress(); r != ncclSuccess) return r;
  const uint64_t seq = next_;
  Slot& slot = slots_[seq % kIbMaxInflight];
  if (slot.pieces > 0 || slot.creditPending) return ncclSuccess;  // kIbMaxInflight receives outstanding
  slot = Slot{};
  slot.seq = seq;
  slot.pieces = rails_.lanes();
  slot.creditPending = true;
  IbRailCredit& c = staging_[seq % kIbMaxInflight];
  c = IbRailCredit{};
  c.addr = reinterpret_cast<uintptr_t>(data);
  c.size = size;
  c.seq = seq + 1;
  for (int r = 0; r < rails_.rails(); r++) c.rkey[r] = rkeys[r];
  next_++;
  if (ncclResult_t res = postCredit(seq, rails_.liveLane(0)); res != ncclSuccess) return res;
  *req = static_cast<int64_t>(seq);
  return ncclSuccess;
}

ncclResult_t IbRailReceiver::test(int64_t req, bool* done, size_t* size) {
  *done = false;
  if (ncclResult_t r = progress(); r != ncclSuccess) return r;
  const Slot& slot = slots_[req % kIbMaxInflight];
  if (slot.seq == static_cast<uint64_t>(req) && slot.pieces == 0 && !slot.creditPending) {
    *done = true;
    if (size) *size = slot.bytes;
  }
  return ncclSuccess;
}

}  // namespace accl::ib
