#include "send_ledger.h"

#include <algorithm>
#include <c10/util/Exception.h>
#include <cstdint>
#include <exception>
#include <thread>
#include <utility>

namespace torch_accl {

SendLedger::SendLedger(c10::intrusive_ptr<c10d::Store> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), size_(size), claimed_(size, 0), sentSeen_(size, 0),
      nextPeer_((rank + 1) % size) {}

std::string SendLedger::key(int src, int dst) const {
  return "accl/sent/" + std::to_string(src) + "/" + std::to_string(dst);
}

void SendLedger::noteSend(int dst) {
  try {
    store_->add(key(rank_, dst), 1);
  } catch (const std::exception&) {
    // The store is gone (its host rank ended): nobody is left to receive from any source.
  }
}

void SendLedger::noteRecv(int src) {
  std::lock_guard<std::mutex> lk(mu_);
  ++claimed_[src];
}

int SendLedger::claimAny(std::chrono::steady_clock::time_point deadline, const std::string& what) {
  using namespace std::chrono;
  auto pause = microseconds(200);
  for (;;) {
    for (int i = 0; i < size_; ++i) {
      int p = (nextPeer_ + i) % size_;
      if (p == rank_) continue;
      std::unique_lock<std::mutex> lk(mu_);
      if (sentSeen_[p] <= claimed_[p]) {
        lk.unlock();
        int64_t total = store_->add(key(p, rank_), 0);  // reads the total (add 0 creates it at 0)
        lk.lock();
        sentSeen_[p] = std::max(sentSeen_[p], total);
      }
      if (sentSeen_[p] > claimed_[p]) {
        ++claimed_[p];
        nextPeer_ = (p + 1) % size_;
        return p;
      }
    }
    auto now = steady_clock::now();
    TORCH_CHECK(now < deadline, "accl: ", what, " on rank ", rank_, ": Timed out: no rank of ", size_,
                " sent to this rank (recv from any source) within the process-group timeout");
    std::this_thread::sleep_for(std::min<steady_clock::duration>(pause, deadline - now));
    pause = std::min<microseconds>(pause * 2, milliseconds(20));
  }
}

}  // namespace torch_accl
