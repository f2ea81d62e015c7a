// mem_world.h: n ranks in one thread, fully connected by small in-memory byte rings, for
// running algorithms' plans without transports (coll_simulation_test, rank_order_test).
#pragma once
#include <gtest/gtest.h>
#include <algorithm>
#include <memory>
#include <vector>
#include "comm/comm.h"
#include "sched/work.h"

namespace accl {

// A bounded byte ring shared by one sender and one receiver (same thread).
struct MemRing {
  explicit MemRing(size_t cap) : buf(cap), cap(cap) {}
  std::vector<char> buf;
  size_t cap;
  uint64_t head = 0, tail = 0;
};

class MemSend final : public SendChannel {
 public:
  explicit MemSend(MemRing* r) : r_(r) {}
  ncclResult_t acquire(void** buf, size_t* avail) override {
    size_t off = r_->tail % r_->cap, free = r_->cap - (r_->tail - r_->head);
    *buf = r_->buf.data() + off;
    *avail = std::min(free, r_->cap - off);
    return ncclSuccess;
  }
  void commit(size_t n) override { r_->tail += n; }
  uint64_t position() const override { return r_->tail; }

 private:
  MemRing* r_;
};

class MemRecv final : public RecvChannel {
 public:
  explicit MemRecv(MemRing* r) : r_(r) {}
  ncclResult_t peek(const void** buf, size_t* avail) override {
    size_t off = r_->head % r_->cap, used = r_->tail - r_->head;
    *buf = r_->buf.data() + off;
    *avail = std::min(used, r_->cap - off);
    return ncclSuccess;
  }
  void release(size_t n) override { r_->head += n; }
  uint64_t position() const override { return r_->head; }

 private:
  MemRing* r_;
};

class MemConn final : public PeerConnection {
 public:
  MemConn(MemRing* out, MemRing* in) : send_(out), recv_(in) {}
  SendChannel* send() override { return &send_; }
  RecvChannel* recv() override { return &recv_; }
  void close(int) override {}
  const char* transportName() const override { return "mem"; }

 private:
  MemSend send_;
  MemRecv recv_;
};

// n ranks fully connected by rings of `cap` bytes.
struct World {
  World(int n, size_t cap, size_t boardBytes = kBoardBytes) : n(n) {
    for (int i = 0; i < n * n; i++) rings.push_back(std::make_unique<MemRing>(cap));
    for (int r = 0; r < n; r++) {
      auto c = std::make_unique<Comm>();
      c->rank = r;
      c->nranks = n;
      c->conns.resize(n);
      for (int p = 0; p < n; p++)
        if (p != r) c->conns[p] = std::make_unique<MemConn>(ring(r, p), ring(p, r));
      comms.push_back(std::move(c));
    }
    // The ShmDirect board: two slots per rank, in ordinary memory (one process here).
    const size_t stride = boardSlotStride(boardBytes);
    boardMemory.assign(n * 2 * stride / sizeof(uint64_t), 0);
    slicedFlags = std::make_unique<std::atomic<uint64_t>[]>(n);
    for (int r = 0; r < n; r++) {
      Board& b = comms[r]->board;
      b.capacity = boardBytes;
      for (int parity = 0; parity < 2; parity++)
        for (int p = 0; p < n; p++)
          b.slots[parity].push_back(reinterpret_cast<BoardSlot*>(
              reinterpret_cast<char*>(boardMemory.data()) + (p * 2 + parity) * stride));
      b.bells.assign(n, nullptr);
      for (int p = 0; p < n; p++) b.sliced.push_back(&slicedFlags[p]);
    }
  }
  static constexpr size_t kBoardBytes = 4096;
  std::vector<uint64_t> boardMemory;
  std::unique_ptr<std::atomic<uint64_t>[]> slicedFlags;  // Board::sliced, [rank]
  MemRing* ring(int from, int to) { return rings[from * n + to].get(); }
  // Runs one lane per rank round-robin; false if no rank can move (deadlock).
  bool run(std::vector<Lane>& lanes) {
    for (;;) {
      bool all = true, moved = false;
      for (int r = 0; r < n; r++) {
        if (lanes[r].finished()) continue;
        all = false;
        EXPECT_EQ(lanes[r].advance(*comms[r], dev::StreamRef{}, &moved), ncclSuccess);
      }
      if (all) return true;
      if (!moved) return false;
    }
  }
  int n;
  std::vector<std::unique_ptr<MemRing>> rings;
  std::vector<std::unique_ptr<Comm>> comms;
};

}  // namespace accl
