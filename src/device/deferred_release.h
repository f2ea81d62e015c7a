// deferred_release.h: returns memory whose release may block, on a helper thread. cuMemFree
// waits for every stream of the device's context; after ncclCommAbort (or a failure) a stream
// may still hold work that moves on only after the abort has returned (a user's stream held by
// an event or flag the caller sets later), so the communicator's device rings cannot be freed
// by the aborting thread. They are handed here, and freed once the device lets them go.
#pragma once
#include <memory>
#include "device/backend.h"

namespace accl::dev {

// Releases `buffer` (whose deleter may use `owner`) on the process's release thread.
void releaseLater(std::shared_ptr<Backend> owner, Buffer buffer);

}  // namespace accl::dev
