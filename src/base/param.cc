// param.cc: environment parameters. Conf files are merged into the environment once with
// "set only if unset", so the process environment always wins and the application sees the
// merged values through getenv() too (NCCL does the same).
#include "base/param.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "base/log.h"

namespace accl {
namespace {

constexpr size_t kConfValueMax = 1023;

// NAME=value per line; '#' starts a comment line; no trimming, so spaces are part of the
// name or value, exactly as NCCL reads them.
void loadConfFile(const std::string& path) {
  FILE* file = fopen(path.c_str(), "r");
  if (file == nullptr) return;
  char* line = nullptr;
  size_t capacity = 0;
  ssize_t length;
  while ((length = getline(&line, &capacity, file)) != -1) {
    if (length > 0 && line[length - 1] == '\n') line[--length] = '\0';
    if (line[0] == '#') continue;
    std::string entry(line, static_cast<size_t>(length));
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = entry.substr(0, eq);
    std::string value = entry.substr(eq + 1, kConfValueMax);
    setenv(name.c_str(), value.c_str(), /*overwrite=*/0);
  }
  free(line);
  fclose(file);
}

std::string homeConfPath() {
  // The passwd entry, not $HOME, as NCCL does: a job launcher may not set HOME.
  passwd entry;
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(getuid(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr ||
      found->pw_dir == nullptr) {
    return "";
  }
  return std::string(found->pw_dir) + "/.nccl.conf";
}

void loadConfFiles() {
  const char* userFile = getenv("NCCL_CONF_FILE");
  if (userFile != nullptr && userFile[0] != '\0') {
    loadConfFile(userFile);
  } else {
    std::string home = homeConfPath();
    if (!home.empty()) loadConfFile(home);
  }
  loadConfFile("/etc/nccl.conf");
}

// strtoll(s, NULL, 0) semantics: hex/octal/decimal, text parses as 0, empty means default.
int64_t readIntParam(const char* env, int64_t defaultValue) {
  const char* text = envGet(env);
  if (text == nullptr || text[0] == '\0') return defaultValue;
  errno = 0;
  long long value = strtoll(text, nullptr, 0);
  if (errno == ERANGE) {
    INFO(kSubsysEnv, "Invalid value %s for %s, using default %lld", text, env,
         static_cast<long long>(defaultValue));
    return defaultValue;
  }
  if (value != defaultValue) INFO(kSubsysEnv, "%s set by environment to %lld", env, value);
  return value;
}

// Strings are re-read at each call; a value is logged once per change, not at every read.
struct StringParamLog {
  std::mutex mutex;
  std::string lastLogged;
};

std::string readStringParam(const char* env, const char* defaultValue, StringParamLog& log) {
  const char* text = envGet(env);
  if (text == nullptr) return defaultValue;
  std::string value(text);
  if (value != defaultValue) {
    std::lock_guard<std::mutex> lock(log.mutex);
    if (value != log.lastLogged) {
      log.lastLogged = value;
      // A secret is never written to a log.
      bool secret = std::strstr(env, "SECRET") != nullptr;
      INFO(kSubsysEnv, "%s set by environment to %s", env, secret ? "(hidden)" : text);
    }
  }
  return value;
}

}  // namespace

const char* envGet(const char* name) {
  static std::once_flag confLoaded;
  std::call_once(confLoaded, loadConfFiles);
  return getenv(name);
}

namespace param {
#define ACCL_PARAM_INT(id, env, def, doc)                              \
  int64_t id() {                                                       \
    static const int64_t value = readIntParam(env, (int64_t)(def));    \
    return value;                                                      \
  }
#define ACCL_PARAM_STR(id, env, def, doc)      \
  std::string id() {                           \
    static StringParamLog log;                 \
    return readStringParam(env, def, log);     \
  }
#include "base/params.def"
#undef ACCL_PARAM_INT
#undef ACCL_PARAM_STR
}  // namespace param

const ParamInfo* paramTable(size_t* count) {
  // Integer defaults are shown evaluated ("1048576", not "1 << 20"), so the text needs storage.
  struct Table {
    std::vector<std::string> defaults;
    std::vector<ParamInfo> rows;
    Table() {
#define ACCL_PARAM_INT(id, env, def, doc) defaults.push_back(std::to_string((int64_t)(def)));
#define ACCL_PARAM_STR(id, env, def, doc) defaults.push_back(def);
#include "base/params.def"
#undef ACCL_PARAM_INT
#undef ACCL_PARAM_STR
      size_t i = 0;
#define ACCL_PARAM_INT(id, env, def, doc) rows.push_back({env, defaults[i++].c_str(), doc, false});
#define ACCL_PARAM_STR(id, env, def, doc) rows.push_back({env, defaults[i++].c_str(), doc, true});
#include "base/params.def"
#undef ACCL_PARAM_INT
#undef ACCL_PARAM_STR
    }
  };
  static const Table table;
  if (count != nullptr) *count = table.rows.size();
  return table.rows.data();
}

}  // namespace accl
