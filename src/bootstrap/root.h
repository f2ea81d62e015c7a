// root.h: the rendezvous root. Collects every rank's Hello, checks that they agree, then
// sends each rank the table of all listen addresses and exits. Serves exactly one rendezvous.
#pragma once
#include <cstdint>
#include "net/socket.h"

namespace accl::boot {

// Runs the root on a detached thread that owns `listener`. It gives up (closing every
// connection, so waiting ranks fail) after kRootIdleTimeoutMs without a new rank.
void startRootThread(net::Socket listener, uint64_t magic);

constexpr int kRootIdleTimeoutMs = 10 * 60 * 1000;

}  // namespace accl::boot
