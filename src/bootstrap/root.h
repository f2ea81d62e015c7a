// root.h: the rendezvous root. Collects every rank's Hello, checks that they agree, then
// sends each rank the table of all listen addresses and exits. Serves exactly one rendezvous.
#pragma once
#include <cstdint>
#include <string>
#include "net/socket.h"

namespace accl::boot {

// Runs the root on a detached thread that owns `listener`. It gives up (closing every
// connection, so waiting ranks fail) after kRootIdleTimeoutMs without a new rank.
// `label` says which communicator the root is for: a rank whose id names another one (wrong
// magic) is refused with a reply naming both.
void startRootThread(net::Socket listener, uint64_t magic, const std::string& label);

// A rank told by the root that the rendezvous failed waits here (at most `timeoutMs`) until a
// root running in its own process has told every other joined rank too: returning at once
// could let the process exit before they learn why.
void waitForFailureAnswers(int timeoutMs);

constexpr int kRootIdleTimeoutMs = 10 * 60 * 1000;

}  // namespace accl::boot
