// launch_order.h: keeps one rank's kernel launches in order whatever stream each is queued on
// (a rank's launches share its mailbox or staging box, so they must not overlap), and says when
// the device has run the last of them (destroy waits for that before freeing what they use).
// Captured launches run when their graph is launched: ordering later work after them is the
// caller's, as with any captured work, so they are not recorded.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include "device/backend.h"

namespace accl {

class LaunchOrder {
 public:
  // Makes `s` wait for this rank's previous uncaptured launches, unless they were queued on
  // the same stream, which runs them first anyway (issue 41: no wait per call in the steady
  // state). Streams are told apart by the backend's streamIdentity, never reused, not by their
  // handles: a stream may be destroyed and its handle reused for another one. A capturing `s`
  // always waits (its work runs when the graph is launched, on whatever stream).
  void orderAfterPrevious(dev::Backend& backend, const dev::StreamRef& s, bool capturing);
  // After this rank's launches of a call are queued on `s`: later ones wait for them.
  void markLaunched(dev::Backend& backend, const dev::StreamRef& s, bool capturing);
  // The same with a marker already recorded on `s` after the launches (null: none, as when
  // capturing), shared by the ranks of one launch; `streamId`: backend.streamIdentity(s).
  void markLaunched(const std::shared_ptr<void>& recorded, uint64_t streamId, bool capturing);
  // The marker recorded after the last uncaptured launch (null: none yet).
  std::shared_ptr<void> last();
  // Waits (at most `limit`) until the device has run the last uncaptured launch.
  bool lastDone(dev::Backend& backend, std::chrono::milliseconds limit);
  // Waits (at most `limit`; milliseconds::max(): for good) until the device has reached `marker`
  // (null: at once); also usable once the LaunchOrder is gone, with a marker taken from last().
  static bool reached(dev::Backend& backend, const std::shared_ptr<void>& marker, std::chrono::milliseconds limit);

 private:
  std::mutex mu_;
  std::shared_ptr<void> marker_;
  bool marked_ = false;
  uint64_t streamId_ = 0;  // the stream of the launches marker_ follows (0: unknown)
};

}  // namespace accl
