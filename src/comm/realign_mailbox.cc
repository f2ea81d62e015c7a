#include "comm/realign_mailbox.h"
#include <algorithm>
#include <cstring>

namespace accl {
namespace {

constexpr size_t kFixedBody = 4 * 8 + 4 + 4 + 8 + sizeof(CallStamp) + sizeof(RealignNote::why);

}  // namespace

void RealignMailbox::request(uint64_t order, const std::string& why, uint32_t flags) {
  std::lock_guard<std::mutex> lk(mu_);
  if (order + 1 <= lastDone_) return;
  if (localWhy_.empty() || order < localOrder_) {
    localWhy_ = why;
    localOrder_ = order;
    localFlags_ = flags;
  }
  uint64_t cur = wanted_.load(std::memory_order_relaxed);
  if (cur == 0 || order + 1 < cur) wanted_.store(order + 1, std::memory_order_release);
}

bool RealignMailbox::deposit(const RealignNote& note, int nranks) {
  if (note.rank < 0 || note.rank >= nranks || note.endPos.size() != static_cast<size_t>(nranks) ||
      note.nowPos.size() != static_cast<size_t>(nranks))
    return false;
  std::lock_guard<std::mutex> lk(mu_);
  if (note.mismatchOrder + 1 <= lastDone_) return false;
  if (notes_.size() != static_cast<size_t>(nranks)) notes_.assign(nranks, RealignNote{});
  // The earliest realignment wins; notes of a later one wait until it is done (they are sent again).
  if (notes_[note.rank].rank >= 0 && notes_[note.rank].mismatchOrder < note.mismatchOrder) return false;
  notes_[note.rank] = note;
  uint64_t cur = wanted_.load(std::memory_order_relaxed);
  if (cur == 0 || note.mismatchOrder + 1 < cur) wanted_.store(note.mismatchOrder + 1, std::memory_order_release);
  return true;
}

std::vector<uint64_t>* RealignMailbox::recordCallStart(uint64_t order, uint64_t board, int nranks) {
  std::lock_guard<std::mutex> lk(recentMu_);
  CallStart& slot = recent_[nextRecent_++ % kRecentCalls];
  slot.order = order;
  slot.board = board;
  slot.sentAt.assign(nranks, ~uint64_t(0));  // allocates once per slot: nranks never changes
  return &slot.sentAt;
}

void RealignMailbox::earliestAfter(uint64_t order, uint64_t* board, std::vector<uint64_t>* pos) {
  std::lock_guard<std::mutex> lk(recentMu_);
  for (const CallStart& s : recent_) {
    if (s.order == ~uint64_t(0) || s.order <= order) continue;
    *board = std::min(*board, s.board);
    for (size_t p = 0; p < pos->size() && p < s.sentAt.size(); p++) (*pos)[p] = std::min((*pos)[p], s.sentAt[p]);
  }
}

std::vector<RealignNote> RealignMailbox::notes(uint64_t order) {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<RealignNote> out = notes_;
  for (RealignNote& n : out)
    if (n.rank >= 0 && n.mismatchOrder != order) n = RealignNote{};
  return out;
}

uint32_t RealignMailbox::flags(uint64_t order) {
  std::lock_guard<std::mutex> lk(mu_);
  uint32_t f = localOrder_ == order && !localWhy_.empty() ? localFlags_ : 0;
  for (const RealignNote& n : notes_)
    if (n.rank >= 0 && n.mismatchOrder == order) f |= n.flags;
  return f;
}

std::string RealignMailbox::localWhy(uint64_t order) {
  std::lock_guard<std::mutex> lk(mu_);
  return localOrder_ == order ? localWhy_ : "";
}

void RealignMailbox::done(uint64_t order) {
  std::lock_guard<std::mutex> lk(mu_);
  lastDone_ = std::max(lastDone_, order + 1);
  bool later = false;
  uint64_t next = 0;
  for (RealignNote& n : notes_) {
    if (n.rank < 0) continue;
    if (n.mismatchOrder <= order) {
      n = RealignNote{};
    } else {
      later = true;
      next = next == 0 ? n.mismatchOrder : std::min(next, n.mismatchOrder);
    }
  }
  if (localOrder_ <= order) localWhy_.clear();
  else if (!localWhy_.empty()) {
    later = true;
    next = next == 0 ? localOrder_ : std::min(next, localOrder_);
  }
  wanted_.store(later ? next + 1 : 0, std::memory_order_release);
}

size_t realignBodyBytes(uint32_t nranks) { return kFixedBody + 16 * static_cast<size_t>(nranks); }

std::string encodeRealignNote(const RealignNote& n, uint64_t commMagic, uint64_t nonce, int toRank) {
  const uint32_t nranks = static_cast<uint32_t>(n.endPos.size());
  RealignWireHeader h{kRealignNoteMagic, commMagic, nonce, toRank, nranks};
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  auto put = [&out](const void* p, size_t len) { out.append(static_cast<const char*>(p), len); };
  put(&n.mismatchOrder, 8);
  put(&n.firstOrder, 8);
  put(&n.lastOrder, 8);
  put(&n.boardPosted, 8);
  put(&n.rank, 4);
  put(&n.inMismatched, 4);
  put(&n.callSeq, 4);
  put(&n.flags, 4);
  put(&n.current, sizeof(CallStamp));
  put(n.why, sizeof(n.why));
  put(n.endPos.data(), 8 * n.endPos.size());
  put(n.nowPos.data(), 8 * n.nowPos.size());
  return out;
}

bool decodeRealignBody(const char* body, size_t bytes, uint32_t nranks, RealignNote* out) {
  if (bytes != realignBodyBytes(nranks)) return false;
  auto get = [&body](void* p, size_t len) {
    std::memcpy(p, body, len);
    body += len;
  };
  get(&out->mismatchOrder, 8);
  get(&out->firstOrder, 8);
  get(&out->lastOrder, 8);
  get(&out->boardPosted, 8);
  get(&out->rank, 4);
  get(&out->inMismatched, 4);
  get(&out->callSeq, 4);
  get(&out->flags, 4);
  get(&out->current, sizeof(CallStamp));
  get(out->why, sizeof(out->why));
  out->why[sizeof(out->why) - 1] = '\0';
  out->endPos.resize(nranks);
  get(out->endPos.data(), 8 * static_cast<size_t>(nranks));
  out->nowPos.resize(nranks);
  get(out->nowPos.data(), 8 * static_cast<size_t>(nranks));
  return true;
}

}  // namespace accl
