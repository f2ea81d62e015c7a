// plugin_net.h: external net plugins, found and adapted as NCCL 2.28 does
// (shared/spec/nccl-plugins.md §2-3). NCCL_NET_PLUGIN names the libraries: unset means
// libnccl-net.so, "none" or empty means none, otherwise a comma list whose entries are tried
// as given and then as libnccl-net-<NAME>.so; STATIC_PLUGIN looks in the executable. Each
// library is asked for ncclNetPlugin_v11 down to _v6, and the newest it exports is wrapped
// as a NetModule, so the rest of ACCL sees one interface whatever the ABI version.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "transports/net/net_module.h"

namespace accl::net {

// Loads every library NCCL_NET_PLUGIN names (once per process; later calls return the same
// modules). INFO lines say what was tried, what loaded, which ABI version, and why not.
const std::vector<NetModule*>& externalNetModules();

// Wraps one plugin table found in `lib` (dlopen handle, kept open) under symbol version
// `version`; exposed for tests. nullptr if the version is not one of 6..11.
std::unique_ptr<NetModule> adaptNetPlugin(const void* table, int version, std::string file);

}  // namespace accl::net
