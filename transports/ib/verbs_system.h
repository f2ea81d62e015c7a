// verbs_system.h: the verbs seam (verbs_seam.h) over the host's libibverbs.so.1, loaded with
// dlopen so ACCL never needs rdma-core at load time. The IB net module (ib_net.h) opens one per
// connection through VerbsApi::open.
#pragma once
#include <memory>
#include <string>
#include "transports/ib/verbs_seam.h"

namespace accl::ib {

// Opens `device` port `port`; on failure returns null with *why naming the cause.
std::unique_ptr<Verbs> openSystemVerbs(const std::string& device, int port, std::string* why);

}  // namespace accl::ib
