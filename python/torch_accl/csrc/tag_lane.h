// tag_lane.h: send/recv with a nonzero tag on CPU tensors, matched by (peer, tag) as gloo does.
//
// NCCL point-to-point matches a pair's messages in posting order, and ignores tags. Tagged
// messages therefore travel on a communicator of their own (the backend's third host
// communicator), so the untagged lane (tag 0, in posting order, as before) costs nothing more,
// and both ends post a pair's tagged messages in one order: the sender's.
//
// When a tagged send is started, the sender publishes its header "<tag> <bytes>" in the group's
// store under accl/tmsg/<src>/<dst>/<n> (n counts its tagged sends to dst) and posts the bytes as
// message n. The receiver reads src's headers in order (without waiting) and posts a receive for
// each message: straight into the earliest receive held here with that tag, or, when there is
// none, into a buffer of its own (the message is parked) that a later receive with that tag
// copies from. A receive whose message has not been announced yet stays held; its wait() keeps
// looking until the process-group timeout, then fails alone (the group stays usable). A message
// whose size differs from its receive's fails that receive, naming both sizes; the message is
// drained and dropped. All of this runs under the backend's launch mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "work.h"

namespace torch_accl {

struct TaggedOp {
  c10::intrusive_ptr<AcclWork> work;
  at::Tensor buf;  // contiguous CPU tensor: what is sent, or where the receive lands
  int peer = -1;
  int tag = 0;
  bool send = false;
};

// One transfer of a flush, posted in this order within one NCCL group (bytes as ncclUint8).
struct TagWire {
  bool send = false;
  int peer = -1;
  void* data = nullptr;
  int64_t bytes = 0;
};

// What one flush starts: the wire transfers, the Works that complete with them, and the
// buffers (parked and drained messages) they need until then.
struct TagFlush {
  std::vector<TagWire> wire;
  std::vector<c10::intrusive_ptr<AcclWork>> works;
  std::vector<at::Tensor> scratch;
  // Receives that failed here (a size mismatch), with their error: not started.
  std::vector<std::pair<c10::intrusive_ptr<AcclWork>, std::exception_ptr>> failed;
};

class TagLane {
 public:
  TagLane(c10::intrusive_ptr<c10d::Store> store, int rank, int size);

  void add(TaggedOp op);
  // Every held send, and every held receive whose message is known (never waits for a peer).
  TagFlush take();
  // Held ops (sends not yet started, receives not yet matched); readable without the mutex.
  int64_t held() const { return held_.load(); }
  // Steady-clock ticks since which something has been held (0: nothing).
  int64_t heldSince() const { return heldSince_.load(); }
  // Removes a held op (its wait timed out, or its batch failed); false if it was not held.
  bool drop(const AcclWork* w);
  // Removes every held op (shutdown).
  std::vector<TaggedOp> dropAll();
  // Why a held receive is still waiting: for its timeout message.
  std::string whyHeld(const AcclWork* w) const;

 private:
  struct Parked {
    int tag;
    at::Tensor bytes;  // uint8, the message
  };
  std::string key(int src, int dst, int64_t n) const;
  // The header of src's next message to this rank, if src has started it: consumes it.
  bool nextHeader(int src, int& tag, int64_t& bytes);
  void updateHeld();

  c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const int size_;
  std::vector<TaggedOp> ops_;             // held, posting order
  std::vector<int64_t> sent_;             // per destination: tagged messages started
  std::vector<int64_t> read_;             // per source: headers read
  std::vector<std::deque<Parked>> parked_;  // per source, arrival order
  std::atomic<int64_t> held_{0};
  std::atomic<int64_t> heldSince_{0};
};

}  // namespace torch_accl
