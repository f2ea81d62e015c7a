// launch_order.h: keeps one rank's kernel launches in order whatever stream each is queued on
// (a rank's launches share its mailbox or staging box, so they must not overlap), and says when
// the device has run the last of them (destroy waits for that before freeing what they use).
// Captured launches run when their graph is launched: ordering later work after them is the
// caller's, as with any captured work, so they are not recorded.
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include "device/backend.h"

namespace accl {

class LaunchOrder {
 public:
  // Makes `s` wait for this rank's previous uncaptured launches (the previous stream itself is
  // not kept: it may be destroyed and its handle reused for another rank's stream).
  void orderAfterPrevious(dev::Backend& backend, const dev::StreamRef& s);
  // After this rank's launches of a call are queued on `s`: later ones wait for them.
  void markLaunched(dev::Backend& backend, const dev::StreamRef& s, bool capturing);
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
};

}  // namespace accl
