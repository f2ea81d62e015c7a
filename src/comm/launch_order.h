// launch_order.h: keeps one rank's kernel launches in order whatever stream each is queued on
// (a rank's launches share its mailbox or staging box, so they must not overlap), and says when
// the device has run the last of them (destroy waits for that before freeing what they use).
// Captured launches run when their graph is launched: ordering later work after them is the
// caller's, as with any captured work, so they are not recorded.
//
// Where the last launch is marked: the kernel path's rank counts its launches in a word of
// mapped host memory that its kernels store when they end (kernels/launch_done.h), so a call
// queues nothing but its launch, and a call on another stream than the last one queues one
// stream memory wait on that word (issue 41: one queue entry per call). An event recorded after
// the launches marks them where that cannot work: the staged path (its one-block kernel keeps
// no per-rank end count), and backends without stream memory waits (HIP, see cuda_backend.cc).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include "device/backend.h"

namespace accl {

// Where the device says it ran a rank's launches: an event recorded after them, or the rank's
// launch counter (`word`, read here; `deviceWord`, waited on by streams) reaching `seq`.
struct LaunchMark {
  std::shared_ptr<void> event;
  std::shared_ptr<const uint64_t> word;  // keeps the counter's memory alive
  const void* deviceWord = nullptr;
  uint64_t seq = 0;
  bool empty() const { return !event && !word; }
};

class LaunchOrder {
 public:
  // Makes `s` wait for this rank's previous uncaptured launches, unless they were queued on
  // the same stream, which runs them first anyway (issue 41: no wait per call in the steady
  // state). Streams are told apart by the backend's streamIdentity, never reused, not by their
  // handles: a stream may be destroyed and its handle reused for another one. A capturing `s`
  // always waits (its work runs when the graph is launched, on whatever stream).
  void orderAfterPrevious(dev::Backend& backend, const dev::StreamRef& s, bool capturing);
  // After this rank's launches of a call are queued on `s`: later ones wait for them (an event
  // recorded on `s` now).
  void markLaunched(dev::Backend& backend, const dev::StreamRef& s, bool capturing);
  // The same with a mark that follows the launches (empty: none, as when capturing), shared by
  // the ranks of one launch for an event; `streamId`: backend.streamIdentity(s).
  void markLaunched(const LaunchMark& mark, uint64_t streamId, bool capturing);
  // The mark of the last uncaptured launch (empty: none yet).
  LaunchMark last();
  // Waits (at most `limit`) until the device has run the last uncaptured launch.
  bool lastDone(dev::Backend& backend, std::chrono::milliseconds limit);
  // Whether the device has reached `mark` (empty: yes).
  static bool passed(dev::Backend& backend, const LaunchMark& mark);
  // Waits (at most `limit`; milliseconds::max(): for good) until the device has reached `mark`
  // (empty: at once); also usable once the LaunchOrder is gone, with a mark taken from last().
  static bool reached(dev::Backend& backend, const LaunchMark& mark, std::chrono::milliseconds limit);
  // A probe saying whether the device has reached `mark`, which may outlive the backend.
  static std::function<bool()> probe(dev::Backend& backend, const LaunchMark& mark);

 private:
  std::mutex mu_;
  LaunchMark mark_;
  uint64_t streamId_ = 0;  // the stream of the launches mark_ follows (0: unknown)
};

}  // namespace accl
