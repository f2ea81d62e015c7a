// Which backend this process uses. Only the host backend exists today; a device backend is
// chosen here, once, when its driver loads and a device is usable.
#include "device/backend.h"

namespace accl::dev {

std::shared_ptr<Backend> processBackend() { return hostBackend(); }

}  // namespace accl::dev
