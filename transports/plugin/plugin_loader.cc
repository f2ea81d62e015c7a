// plugin_loader.cc: finding net plugin libraries (NCCL_NET_PLUGIN) and their newest ABI symbol.
#include <dlfcn.h>
#include <strings.h>
#include <mutex>
#include "base/check.h"
#include "base/param.h"
#include "transports/plugin/plugin_net.h"

namespace accl::net {
namespace {

constexpr int kMaxPluginEntries = 14;  // as NCCL 2.28

struct DlCloser {
  void operator()(void* h) const {
    if (h) dlclose(h);
  }
};

struct LoadedPlugins {
  std::vector<std::unique_ptr<void, DlCloser>> libs;
  std::vector<std::unique_ptr<NetModule>> owned;
  std::vector<NetModule*> modules;
};

bool isLibSo(const std::string& name) {
  return name.size() > 6 && name.compare(0, 3, "lib") == 0 && name.compare(name.size() - 3, 3, ".so") == 0;
}

// dlopen as NCCL does: the name as given, then libnccl-net-<name>.so. Returns the file that opened.
void* openLibrary(const std::string& entry, std::string* file) {
  if (strcasecmp(entry.c_str(), "STATIC_PLUGIN") == 0) {
    *file = "(executable)";
    return dlopen(nullptr, RTLD_NOW | RTLD_LOCAL);
  }
  std::vector<std::string> tries{entry};
  if (entry.find('/') == std::string::npos && !isLibSo(entry)) tries.push_back("libnccl-net-" + entry + ".so");
  for (const std::string& t : tries) {
    void* h = dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) {
      *file = t;
      return h;
    }
    const char* err = dlerror();
    std::string why = err ? err : "unknown error";
    if (why.find("No such file") != std::string::npos || why.find("cannot open shared object") != std::string::npos)
      INFO(kSubsysInit | kSubsysNet, "NET/Plugin: %s not found", t.c_str());
    else
      INFO(kSubsysInit | kSubsysNet, "NET/Plugin: cannot load %s: %s", t.c_str(), why.c_str());
  }
  return nullptr;
}

void loadEntry(const std::string& entry, LoadedPlugins* out) {
  std::string file;
  void* h = openLibrary(entry, &file);
  if (!h) return;
  std::unique_ptr<void, DlCloser> lib(h);
  for (int v = 11; v >= 6; v--) {
    std::string sym = "ncclNetPlugin_v" + std::to_string(v);
    const void* table = dlsym(h, sym.c_str());
    if (!table) continue;
    auto module = adaptNetPlugin(table, v, file);
    INFO(kSubsysInit | kSubsysNet, "NET/Plugin: loaded %s from %s (%s)", module->name(), file.c_str(), sym.c_str());
    out->modules.push_back(module.get());
    out->owned.push_back(std::move(module));
    out->libs.push_back(std::move(lib));
    return;
  }
  INFO(kSubsysInit | kSubsysNet, "NET/Plugin: %s exports no ncclNetPlugin_v11..v6 symbol: unsupported, skipped",
       file.c_str());
}

std::vector<std::string> pluginEntries() {
  const char* env = envGet("NCCL_NET_PLUGIN");
  if (!env) return {"libnccl-net.so"};
  std::string value = env;
  if (strcasecmp(value.c_str(), "none") == 0) return {};
  std::vector<std::string> entries;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    std::string e = value.substr(start, comma - start);
    if (!e.empty()) {
      if (static_cast<int>(entries.size()) == kMaxPluginEntries) {
        WARN("NCCL_NET_PLUGIN lists more than %d plugins; ignoring '%s' and the rest", kMaxPluginEntries, e.c_str());
        break;
      }
      entries.push_back(e);
    }
    start = comma + 1;
  }
  return entries;
}

}  // namespace

const std::vector<NetModule*>& externalNetModules() {
  // Loaded once and kept for the life of the process: a library's code may still run in
  // threads of a finalizing communicator, and reloading per communicator costs dlopen.
  static LoadedPlugins* loaded = [] {
    auto* l = new LoadedPlugins;
    std::vector<std::string> entries = pluginEntries();
    if (entries.empty()) INFO(kSubsysInit | kSubsysNet, "NET/Plugin: NCCL_NET_PLUGIN=none: no external plugin");
    for (const std::string& e : entries) loadEntry(e, l);
    return l;
  }();
  return loaded->modules;
}

}  // namespace accl::net
