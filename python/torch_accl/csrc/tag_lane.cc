#include "tag_lane.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <sstream>

#include <c10/util/Exception.h>

namespace torch_accl {
namespace {
int64_t nowTicks() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

std::exception_ptr distError(const std::string& msg) {
  return std::make_exception_ptr(
      c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg));
}
}  // namespace

TagLane::TagLane(c10::intrusive_ptr<c10d::Store> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), size_(size), sent_(size, 0), read_(size, 0), parked_(size) {}

std::string TagLane::key(int src, int dst, int64_t n) const {
  return "accl/tmsg/" + std::to_string(src) + "/" + std::to_string(dst) + "/" + std::to_string(n);
}

void TagLane::updateHeld() {
  held_.store((int64_t)ops_.size());
  if (ops_.empty()) heldSince_.store(0);
  else if (heldSince_.load() == 0) heldSince_.store(nowTicks());
}

void TagLane::add(TaggedOp op) {
  ops_.push_back(std::move(op));
  updateHeld();
}

bool TagLane::nextHeader(int src, int& tag, int64_t& bytes) {
  std::string k = key(src, rank_, read_[src] + 1);
  if (!store_->check({k})) return false;
  std::vector<uint8_t> v = store_->get(k);
  std::istringstream in(std::string(v.begin(), v.end()));
  in >> tag >> bytes;
  TORCH_CHECK(!in.fail(), "accl: bad tagged-message header under ", k);
  ++read_[src];
  return true;
}

TagFlush TagLane::take() {
  TagFlush f;
  std::vector<bool> done(ops_.size(), false);
  auto mismatch = [&](const TaggedOp& r, int64_t sent) {
    return distError(c10::str("accl: recv from rank ", r.peer, " with tag ", r.tag, " on rank ", rank_, ": rank ",
                              r.peer, " sent ", sent, " bytes with that tag, this receive expects ", r.buf.nbytes(),
                              " bytes (a send and its receive must have the same size)"));
  };
  // Sends: all of them, in posting order, each announced before it is posted.
  for (size_t i = 0; i < ops_.size(); ++i) {
    TaggedOp& s = ops_[i];
    if (!s.send) continue;
    int64_t n = ++sent_[s.peer];
    std::string h = std::to_string(s.tag) + " " + std::to_string((int64_t)s.buf.nbytes());
    store_->set(key(rank_, s.peer, n), std::vector<uint8_t>(h.begin(), h.end()));
    if (s.buf.nbytes() > 0) f.wire.push_back(TagWire{true, s.peer, s.buf.data_ptr(), (int64_t)s.buf.nbytes()});
    f.works.push_back(s.work);
    done[i] = true;
  }
  // Receives, per source: first from what is parked, then from the messages announced since.
  for (int src = 0; src < size_; ++src) {
    std::vector<size_t> open;
    for (size_t i = 0; i < ops_.size(); ++i)
      if (!ops_[i].send && ops_[i].peer == src) open.push_back(i);
    if (open.empty()) continue;
    auto& parked = parked_[src];
    for (size_t i : open) {
      TaggedOp& r = ops_[i];
      auto it = std::find_if(parked.begin(), parked.end(), [&](const Parked& p) { return p.tag == r.tag; });
      if (it == parked.end()) continue;
      at::Tensor msg = it->bytes;
      parked.erase(it);
      done[i] = true;
      if (msg.nbytes() != r.buf.nbytes()) {
        f.failed.emplace_back(r.work, mismatch(r, (int64_t)msg.nbytes()));
        continue;
      }
      // Copied once the parking receive is done: it was posted on this lane's stream earlier.
      at::Tensor dst = r.buf;
      auto prev = std::move(r.work->post_);
      r.work->post_ = [msg, dst, prev]() {
        if (msg.nbytes() > 0) std::memcpy(dst.data_ptr(), msg.data_ptr(), msg.nbytes());
        if (prev) prev();
      };
      f.works.push_back(r.work);
    }
    auto firstOpen = [&](int tag) -> int64_t {
      for (size_t i : open)
        if (!done[i] && ops_[i].tag == tag) return (int64_t)i;
      return -1;
    };
    auto anyOpen = [&] {
      for (size_t i : open)
        if (!done[i]) return true;
      return false;
    };
    int tag = 0;
    int64_t bytes = 0;
    while (anyOpen() && nextHeader(src, tag, bytes)) {
      int64_t i = firstOpen(tag);
      if (i >= 0 && (int64_t)ops_[i].buf.nbytes() == bytes) {
        TaggedOp& r = ops_[i];
        if (bytes > 0) f.wire.push_back(TagWire{false, src, r.buf.data_ptr(), bytes});
        f.works.push_back(r.work);
        done[i] = true;
        continue;
      }
      at::Tensor msg = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
      if (bytes > 0) f.wire.push_back(TagWire{false, src, msg.data_ptr(), bytes});
      f.scratch.push_back(msg);
      if (i >= 0) {  // drained and dropped: its receive fails
        f.failed.emplace_back(ops_[i].work, mismatch(ops_[i], bytes));
        done[i] = true;
      } else {
        parked.push_back(Parked{tag, msg});
      }
    }
  }
  std::vector<TaggedOp> keep;
  for (size_t i = 0; i < ops_.size(); ++i)
    if (!done[i]) keep.push_back(std::move(ops_[i]));
  ops_.swap(keep);
  updateHeld();
  return f;
}

bool TagLane::drop(const AcclWork* w) {
  auto it = std::find_if(ops_.begin(), ops_.end(), [&](const TaggedOp& o) { return o.work.get() == w; });
  if (it == ops_.end()) return false;
  ops_.erase(it);
  updateHeld();
  return true;
}

std::vector<TaggedOp> TagLane::dropAll() {
  std::vector<TaggedOp> ops;
  ops.swap(ops_);
  updateHeld();
  return ops;
}

std::string TagLane::whyHeld(const AcclWork* w) const {
  for (auto& o : ops_) {
    if (o.work.get() != w || o.send) continue;
    std::string tags;
    for (auto& p : parked_[o.peer]) tags += (tags.empty() ? "" : ", ") + std::to_string(p.tag);
    return c10::str("no message with tag ", o.tag, " from rank ", o.peer, " arrived (rank ", o.peer, " sent ",
                    read_[o.peer], " tagged message(s) to this rank so far",
                    tags.empty() ? std::string() : "; unclaimed here, with tags: " + tags, ")");
  }
  return "";
}

}  // namespace torch_accl
