#include "sched/mismatch_check.h"
#include <cstring>

namespace accl {
namespace {

constexpr uint64_t kFingerprintMagic = 0x4143434c43414c4cull;  // "ACCLCALL"
constexpr uint64_t kP2pMagic = 0x4143434c50325031ull;          // "ACCLP2P1"

Fingerprint::Call callOf(const OpDesc& op) {
  Fingerprint::Call c{};
  c.count = op.count;
  c.root = op.isP2p() ? op.peer : op.root;  // on the wire: the root, or the peer of a Send/Recv
  c.kind = static_cast<uint8_t>(op.kind);
  c.type = static_cast<uint8_t>(op.type);
  c.red = static_cast<uint8_t>(op.red);
  // Ranks in different ACCL_DETERMINISTIC modes plan differently shaped reductions.
  const bool rankOrder = (op.kind == OpKind::AllReduce || op.kind == OpKind::Reduce ||
                          op.kind == OpKind::ReduceScatter) &&
                         op.comm->deterministic.load(std::memory_order_relaxed);
  c.flags = static_cast<uint8_t>((op.avg ? 1 : 0) | (op.preMul ? 2 : 0) | (rankOrder ? 4 : 0) |
                                 (op.refusedArg != RefusedArg::None ? 0x80 : 0));
  return c;
}

std::string describe(const Fingerprint& f) {
  std::string d;
  for (uint32_t i = 0; i < f.nops && i < 2; i++) {
    const Fingerprint::Call& c = f.calls[i];
    if (!d.empty()) d += " + ";
    d += describeCall(static_cast<OpKind>(c.kind), c.count, static_cast<ncclDataType_t>(c.type),
                      static_cast<dev::RedKind>(c.red), c.flags & 1, c.flags & 2, c.root);
    if (c.flags & 4) d += " in rank order (deterministic)";
  }
  if (f.nops > 2) d += " + " + std::to_string(f.nops - 2) + " more";
  if (f.refused)
    d += " (refused for its argument " + std::string(refusedArgName(static_cast<RefusedArg>(f.refused))) +
         ", a void call)";
  return d.empty() ? "no collective" : d;
}

bool sameCalls(const Fingerprint& a, const Fingerprint& b) {
  return a.nops == b.nops && a.hash == b.hash && std::memcmp(a.calls, b.calls, sizeof(a.calls)) == 0;
}

// Receives [header][exactly the bytes the sender sent].
class CheckedRecv final : public StepSource {
 public:
  CheckedRecv(const OpDesc& op, std::string* mismatch, std::string* broken)
      : peer_(op.peer), dst_(static_cast<char*>(op.recvbuff)),
        posted_(op.count * dev::typeSize(op.type)), call_(op.describe()), mismatch_(mismatch), broken_(broken) {}
  bool next(Step* out) override {
    CollArgs bytes;  // int8 steps: the sender's size need not be a multiple of our type
    switch (state_++) {
      case 0: *out = recvStep(bytes, peer_, reinterpret_cast<char*>(&header_), sizeof(header_)); return true;
      case 1: {
        if (header_.magic != kP2pMagic) {
          if (broken_->empty())
            *broken_ = call_ + ": the data from rank " +
                       std::to_string(peer_) + " has no size header (set ACCL_CHECK_MISMATCH the same on every rank)";
          return false;
        }
        if (header_.bytes != posted_ && mismatch_->empty())
          *mismatch_ = "receive from rank " + std::to_string(peer_) +
                       " was posted for " + std::to_string(posted_) + " bytes but rank " + std::to_string(peer_) +
                       " sent " + std::to_string(header_.bytes) + " bytes (" + call_ + ")";
        // More than posted: consume it all (dst = null discards), so the stream stays aligned.
        *out = recvStep(bytes, peer_, header_.bytes <= posted_ ? dst_ : nullptr, header_.bytes);
        return true;
      }
      default: return false;
    }
  }

 private:
  int peer_;
  char* dst_;
  uint64_t posted_;
  std::string call_;
  std::string* mismatch_;
  std::string* broken_;
  P2pHeader header_{};
  int state_ = 0;
};

}  // namespace

Fingerprint fingerprintOf(const std::vector<const OpDesc*>& collectives) {
  Fingerprint f{};
  f.magic = kFingerprintMagic;
  f.nops = static_cast<uint32_t>(collectives.size());
  uint64_t h = 1469598103934665603ull;  // FNV-1a over every call
  for (size_t i = 0; i < collectives.size(); i++) {
    Fingerprint::Call c = callOf(*collectives[i]);
    const unsigned char* p = reinterpret_cast<const unsigned char*>(&c);
    for (size_t b = 0; b < sizeof(c); b++) h = (h ^ p[b]) * 1099511628211ull;
    if (i < 2) f.calls[i] = c;
    if (collectives[i]->refusedArg != RefusedArg::None && f.refused == 0)
      f.refused = static_cast<uint32_t>(collectives[i]->refusedArg);
  }
  f.hash = h;
  return f;
}

std::string compareFingerprints(const Fingerprint* table, int nranks, bool* fatal) {
  *fatal = false;
  for (int r = 0; r < nranks; r++) {
    if (table[r].magic != kFingerprintMagic) {
      *fatal = true;
      return "rank " + std::to_string(r) +
             " sent no call fingerprint: set ACCL_CHECK_MISMATCH the same on every rank (or rank " +
             std::to_string(r) + " is in a send/receive while the others are in a collective)";
    }
  }
  for (int r = 1; r < nranks; r++) {
    if (!sameCalls(table[0], table[r]))
      return "rank 0 called " + describe(table[0]) + " but rank " + std::to_string(r) + " called " + describe(table[r]);
  }
  return "";
}

std::unique_ptr<StepSource> makeCheckedRecv(const OpDesc& op, std::string* mismatch, std::string* broken) {
  return std::make_unique<CheckedRecv>(op, mismatch, broken);
}

P2pHeader p2pHeader(uint64_t bytes) { return P2pHeader{kP2pMagic, bytes}; }

}  // namespace accl
