// plugin_loader.cc: finding net plugin libraries (NCCL_NET_PLUGIN), their newest ABI symbol,
// and keeping each loaded exactly while communicators use it (see plugin_net.h).
#include <dlfcn.h>
#include <strings.h>
#include <mutex>
#include <utility>
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

// One NCCL_NET_PLUGIN entry.
struct Entry {
  enum class State { NotLoaded, Loaded, NotFound };
  std::string name;
  State state = State::NotLoaded;
  std::unique_ptr<void, DlCloser> lib;  // declared before module: the module goes first
  std::unique_ptr<NetModule> module;
  PluginVerdict verdict;
  int refs = 0;
};

struct Table {
  std::mutex mu;
  bool listed = false;
  std::vector<Entry> entries;
};

Table& table() {
  static Table* t = new Table;  // holds may be released by threads still running at exit
  return *t;
}

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

void load(Entry* e) {
  std::string file;
  void* h = openLibrary(e->name, &file);
  if (!h) {
    e->state = Entry::State::NotFound;
    return;
  }
  std::unique_ptr<void, DlCloser> lib(h);
  for (int v = 11; v >= 6; v--) {
    std::string sym = "ncclNetPlugin_v" + std::to_string(v);
    const void* t = dlsym(h, sym.c_str());
    if (!t) continue;
    e->module = adaptNetPlugin(t, v, file);
    e->lib = std::move(lib);
    e->verdict = PluginVerdict{};
    e->refs = static_cast<int>(param::netPluginRefCount());
    e->state = Entry::State::Loaded;
    INFO(kSubsysInit | kSubsysNet, "NET/Plugin: loaded %s from %s (%s)", e->module->name(), file.c_str(), sym.c_str());
    return;
  }
  INFO(kSubsysInit | kSubsysNet, "NET/Plugin: %s exports no ncclNetPlugin_v11..v6 symbol: unsupported, skipped",
       file.c_str());
  e->state = Entry::State::NotFound;
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

class Hold final : public NetPluginHold {
 public:
  explicit Hold(Entry* e) : entry_(e) {}
  ~Hold() override {
    Table& t = table();
    std::lock_guard<std::mutex> lk(t.mu);
    if (--entry_->refs > 0) return;
    // The last communicator using it is gone: finalize (the module's destructor), dlclose.
    INFO(kSubsysInit | kSubsysNet, "NET/Plugin: unloading %s (%s): no communicator uses it any more",
         entry_->module->name(), entry_->module->origin().c_str());
    entry_->module.reset();
    entry_->lib.reset();
    entry_->verdict = PluginVerdict{};
    entry_->state = Entry::State::NotLoaded;
  }

 private:
  Entry* entry_;  // entries never move once listed
};

}  // namespace

ncclResult_t chooseNetPlugin(const std::function<int(const std::vector<LoadedNetPlugin>&)>& choose,
                             std::unique_ptr<NetPluginHold>* hold) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  if (!t.listed) {
    std::vector<std::string> names = pluginEntries();
    if (names.empty()) INFO(kSubsysInit | kSubsysNet, "NET/Plugin: NCCL_NET_PLUGIN=none: no external plugin");
    t.entries.resize(names.size());
    for (size_t i = 0; i < names.size(); i++) t.entries[i].name = names[i];
    t.listed = true;
  }
  std::vector<LoadedNetPlugin> loaded;
  std::vector<Entry*> owners;
  for (Entry& e : t.entries) {
    if (e.state == Entry::State::NotLoaded) load(&e);
    if (e.state != Entry::State::Loaded) continue;
    loaded.push_back({e.module.get(), &e.verdict});
    owners.push_back(&e);
  }
  int chosen = choose(loaded);
  if (chosen < 0 || chosen >= static_cast<int>(owners.size())) {
    hold->reset();
    return ncclSuccess;
  }
  owners[chosen]->refs++;
  *hold = std::make_unique<Hold>(owners[chosen]);
  return ncclSuccess;
}

int loadedNetPluginCount() {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  int n = 0;
  for (const Entry& e : t.entries) n += e.state == Entry::State::Loaded;
  return n;
}

int netPluginHoldCount() {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  int n = 0;
  for (const Entry& e : t.entries) n += e.state == Entry::State::Loaded ? e.refs : 0;
  return n;
}

}  // namespace accl::net
