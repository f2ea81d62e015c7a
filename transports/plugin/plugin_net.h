// plugin_net.h: external net plugins, found and adapted as NCCL 2.28 does
// (shared/spec/nccl-plugins.md §2-3). NCCL_NET_PLUGIN names the libraries: unset means
// libnccl-net.so, "none" or empty means none, otherwise a comma list whose entries are tried
// as given and then as libnccl-net-<NAME>.so; STATIC_PLUGIN looks in the executable. Each
// library is asked for ncclNetPlugin_v11 down to _v6, and the newest it exports is wrapped
// as a NetModule, so the rest of ACCL sees one interface whatever the ABI version.
//
// Lifetime (NCCL 2.28): the list is read once per process; a library is loaded when a
// communicator first needs a net module and stays loaded while a communicator uses it
// (reference count); when the last one is destroyed it is dlclose()d, and a later
// communicator loads it again (its init runs again). NCCL_NET_PLUGIN_REF_COUNT=N starts every
// library with N extra references, so N > 0 keeps it loaded for the life of the process.
// Libraries tried but not used (init failed, no device, another name asked for) stay loaded,
// as in NCCL; entries that were not found are not retried.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "transports/net/net_module.h"

namespace accl::net {

// What init() and devices() said about a loaded plugin; probed once per load.
struct PluginVerdict {
  bool probed = false;
  std::string unusable;   // empty: usable
  std::vector<int> devs;  // its devices that can send host memory
};

struct LoadedNetPlugin {
  NetModule* module = nullptr;
  PluginVerdict* verdict = nullptr;
};

// Keeps one library loaded; releasing the last hold unloads it (see above).
class NetPluginHold {
 public:
  virtual ~NetPluginHold() = default;
};

// Loads the entries of NCCL_NET_PLUGIN that are not loaded (INFO lines say what was tried,
// what loaded, which ABI version, and why not), then calls `choose` with the loaded plugins
// in list order, under the lock that guards loading and unloading. `choose` returns the index
// of the plugin the communicator uses, or -1 for none; *hold then keeps that library loaded.
ncclResult_t chooseNetPlugin(const std::function<int(const std::vector<LoadedNetPlugin>&)>& choose,
                             std::unique_ptr<NetPluginHold>* hold);

// Libraries loaded right now and the holds on them (tests and INFO lines).
int loadedNetPluginCount();
int netPluginHoldCount();

// Wraps one plugin table found in `lib` (dlopen handle, kept open) under symbol version
// `version`; exposed for tests. nullptr if the version is not one of 6..11.
std::unique_ptr<NetModule> adaptNetPlugin(const void* table, int version, std::string file);

}  // namespace accl::net
