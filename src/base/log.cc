// log.cc: NCCL-compatible logging. Settings (NCCL_DEBUG*, read through envGet so conf files
// count) are parsed once and cached in atomics, because INFO/TRACE guards sit on hot paths
// and must cost one load. One mutex serialises settings (re)initialisation and line writes,
// so a line is never interleaved with another and resetLogInit() never closes a file that a
// writer is using.
#include "base/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

#include "base/param.h"
#include "nccl.h"

namespace accl {
namespace {

constexpr int kLevelUninitialised = -1;
constexpr size_t kMessageMax = 1024;  // NCCL's message buffer size; longer text is cut.
constexpr size_t kLineMax = 1536;

// Cheap, lock-free reads for the hot path. gLevel is stored last (release) by the
// initialiser, so a reader that sees a level also sees the mask that goes with it.
std::atomic<int> gLevel{kLevelUninitialised};
std::atomic<uint64_t> gSubsysMask{0};

// Everything below is guarded by gMutex.
std::mutex gMutex;
FILE* gOut = nullptr;  // stdout or the NCCL_DEBUG_FILE stream.
bool gOutIsOwnFile = false;
std::string gHost;
unsigned gTimestampLevels = 0;  // bit per LogLevel value
std::string gTimestampBefore;   // strftime format before the %Nf fraction (or all of it)
std::string gTimestampAfter;    // strftime format after the %Nf fraction
int gTimestampFractionDigits = 0;
bool gWarnRaisesToInfo = false;
std::chrono::steady_clock::time_point gEpoch;
char gLastError[kMessageMax] = "";

thread_local int tLogDevice = 0;
thread_local char tLastErrorCopy[kMessageMax];
// The last few WARNs (last-error kind), under gMutex, for firstRecentWarnFor.
struct RecentWarn {
  int64_t atMs = 0;
  long thread = 0;
  char text[kMessageMax] = "";
};
constexpr int kRecentWarns = 16;
RecentWarn gRecentWarns[kRecentWarns];
int gRecentNext = 0;
int64_t monotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
long callingThread() { return static_cast<long>(syscall(SYS_gettid)); }

struct NamedBit {
  const char* name;
  uint64_t bits;
};

constexpr NamedBit kSubsysNames[] = {
    {"INIT", kSubsysInit},     {"COLL", kSubsysColl},           {"P2P", kSubsysP2p},
    {"SHM", kSubsysShm},       {"NET", kSubsysNet},             {"GRAPH", kSubsysGraph},
    {"TUNING", kSubsysTuning}, {"ENV", kSubsysEnv},             {"ALLOC", kSubsysAlloc},
    {"CALL", kSubsysCall},     {"PROXY", kSubsysProxy},         {"NVLS", kSubsysNvls},
    {"BOOTSTRAP", kSubsysBootstrap}, {"REG", kSubsysReg},       {"PROFILE", kSubsysProfile},
    {"RAS", kSubsysRas},       {"ALL", kSubsysAll},
};

constexpr NamedBit kLevelNames[] = {
    {"VERSION", 1u << static_cast<int>(LogLevel::Version)},
    {"WARN", 1u << static_cast<int>(LogLevel::Warn)},
    {"INFO", 1u << static_cast<int>(LogLevel::Info)},
    {"ABORT", 1u << static_cast<int>(LogLevel::Abort)},
    {"TRACE", 1u << static_cast<int>(LogLevel::Trace)},
    {"ALL", ~0u},
};

LogLevel parseLevel(const char* text) {
  if (text == nullptr) return LogLevel::None;
  if (strcasecmp(text, "VERSION") == 0) return LogLevel::Version;
  if (strcasecmp(text, "WARN") == 0) return LogLevel::Warn;
  if (strcasecmp(text, "INFO") == 0) return LogLevel::Info;
  if (strcasecmp(text, "ABORT") == 0) return LogLevel::Abort;
  if (strcasecmp(text, "TRACE") == 0) return LogLevel::Trace;
  return LogLevel::None;
}

// "A,B,C" or "^A,B": the union of the named bits, or everything but them. Unknown names
// are ignored, as NCCL does, so a typo never stops a job.
template <size_t N>
uint64_t parseNamedList(const char* text, const NamedBit (&names)[N]) {
  bool invert = text[0] == '^';
  if (invert) text++;
  uint64_t bits = 0;
  std::string list(text);
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string token = list.substr(start, end - start);
    for (const NamedBit& entry : names) {
      if (strcasecmp(token.c_str(), entry.name) == 0) bits |= entry.bits;
    }
    start = end + 1;
  }
  return invert ? ~bits : bits;
}

std::string shortHostname() {
  char name[256] = "";
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  name[sizeof(name) - 1] = '\0';
  if (char* dot = strchr(name, '.')) *dot = '\0';
  return name;
}

// NCCL_DEBUG_FILE expansion: %h host, %p pid, %% percent; any other %x stays as written.
std::string expandLogFileName(const char* pattern, const std::string& host) {
  std::string path;
  for (const char* c = pattern; *c != '\0'; c++) {
    if (c[0] == '%' && c[1] == 'h') {
      path += host;
      c++;
    } else if (c[0] == '%' && c[1] == 'p') {
      path += std::to_string(getpid());
      c++;
    } else if (c[0] == '%' && c[1] == '%') {
      path += '%';
      c++;
    } else {
      path += *c;
    }
  }
  return path;
}

// Splits the timestamp format at its first "%Nf" (N = 1..9 fractional digits), which
// strftime does not know. '_' stands for a space because spaces are awkward in env values.
void parseTimestampFormat(const char* format) {
  std::string text(format);
  for (char& c : text) {
    if (c == '_') c = ' ';
  }
  gTimestampBefore = text;
  gTimestampAfter.clear();
  gTimestampFractionDigits = 0;
  for (size_t i = 0; i + 1 < text.size(); i++) {
    if (text[i] != '%') continue;
    if (text[i + 1] == '%') {
      i++;  // "%%" is a literal percent, not the start of a directive.
      continue;
    }
    if (text[i + 1] >= '1' && text[i + 1] <= '9' && i + 2 < text.size() && text[i + 2] == 'f') {
      gTimestampBefore = text.substr(0, i);
      gTimestampAfter = text.substr(i + 3);
      gTimestampFractionDigits = text[i + 1] - '0';
      return;
    }
  }
}

void closeLogFile() {
  if (gOutIsOwnFile && gOut != nullptr) fclose(gOut);
  gOut = nullptr;
  gOutIsOwnFile = false;
}

std::string versionBanner() {
  char banner[128];
  snprintf(banner, sizeof(banner), "NCCL version %d.%d.%d%s+accl (ACCL host library)",
           NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX);
  return banner;
}

int currentTid() { return static_cast<int>(syscall(SYS_gettid)); }

// "[2025-01-01 12:00:00] " per NCCL_DEBUG_TIMESTAMP_FORMAT, or "" for levels without one.
size_t formatTimestamp(LogLevel level, char* out, size_t size) {
  if ((gTimestampLevels & (1u << static_cast<int>(level))) == 0) return 0;
  if (gTimestampBefore.empty() && gTimestampAfter.empty() && gTimestampFractionDigits == 0) {
    return 0;
  }
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  tm local;
  localtime_r(&now.tv_sec, &local);
  size_t len = gTimestampBefore.empty() ? 0 : strftime(out, size, gTimestampBefore.c_str(), &local);
  if (gTimestampFractionDigits > 0) {
    long fraction = now.tv_nsec;
    for (int d = gTimestampFractionDigits; d < 9; d++) fraction /= 10;
    int n = snprintf(out + len, size - len, "%0*ld", gTimestampFractionDigits, fraction);
    if (n > 0) len += std::min(static_cast<size_t>(n), size - len - 1);
    if (!gTimestampAfter.empty()) len += strftime(out + len, size - len, gTimestampAfter.c_str(), &local);
  }
  return len;
}

// Writes one finished line; caller holds gMutex.
void writeLineLocked(const char* text, size_t len) {
  FILE* out = gOut != nullptr ? gOut : stdout;
  fwrite(text, 1, len, out);
  fflush(out);
}

// Reads NCCL_DEBUG* (again, after resetLogInit) and returns the level. Caller holds gMutex.
int initLocked() {
  int ready = gLevel.load(std::memory_order_acquire);
  if (ready != kLevelUninitialised) return ready;

  LogLevel level = parseLevel(envGet("NCCL_DEBUG"));
  const char* subsys = envGet("NCCL_DEBUG_SUBSYS");
  uint64_t mask = subsys != nullptr ? parseNamedList(subsys, kSubsysNames)
                                    : (kSubsysInit | kSubsysBootstrap | kSubsysEnv);
  const char* tsLevels = envGet("NCCL_DEBUG_TIMESTAMP_LEVELS");
  gTimestampLevels = tsLevels != nullptr ? static_cast<unsigned>(parseNamedList(tsLevels, kLevelNames))
                                         : 1u << static_cast<int>(LogLevel::Warn);
  const char* tsFormat = envGet("NCCL_DEBUG_TIMESTAMP_FORMAT");
  parseTimestampFormat(tsFormat != nullptr ? tsFormat : "[%F %T] ");
  const char* warnInfo = envGet("NCCL_WARN_ENABLE_DEBUG_INFO");
  gWarnRaisesToInfo = warnInfo != nullptr && strtoll(warnInfo, nullptr, 0) != 0;
  gHost = shortHostname();
  gEpoch = std::chrono::steady_clock::now();

  closeLogFile();
  gOut = stdout;
  const char* filePattern = envGet("NCCL_DEBUG_FILE");
  if (level > LogLevel::Version && filePattern != nullptr && filePattern[0] != '\0') {
    std::string path = expandLogFileName(filePattern, gHost);
    if (FILE* file = fopen(path.c_str(), "w")) {
      setvbuf(file, nullptr, _IOLBF, 0);  // line-buffered: a crash keeps what was logged
      gOut = file;
      gOutIsOwnFile = true;
    }
  }

  // NCCL shows the banner bare at VERSION/WARN and as an INFO line (all subsystems) above.
  if (level == LogLevel::Version || level == LogLevel::Warn) {
    std::string line = versionBanner() + "\n";
    writeLineLocked(line.data(), line.size());
  } else if (level >= LogLevel::Info) {
    char line[kLineMax];
    size_t len = formatTimestamp(LogLevel::Info, line, sizeof(line));
    int n = snprintf(line + len, sizeof(line) - len, "%s:%d:%d [%d] NCCL INFO %s\n", gHost.c_str(),
                     getpid(), currentTid(), tLogDevice, versionBanner().c_str());
    if (n > 0) writeLineLocked(line, std::min(len + n, sizeof(line) - 1));
  }

  gSubsysMask.store(mask, std::memory_order_relaxed);
  gLevel.store(static_cast<int>(level), std::memory_order_release);
  return static_cast<int>(level);
}

int currentLevel() {
  int level = gLevel.load(std::memory_order_acquire);
  if (level != kLevelUninitialised) return level;
  std::lock_guard<std::mutex> lock(gMutex);
  return initLocked();
}

bool levelAndSubsysEnabled(int current, LogLevel level, uint64_t subsys) {
  if (current < static_cast<int>(level)) return false;
  if (level == LogLevel::Version || level == LogLevel::Warn) return true;
  return (gSubsysMask.load(std::memory_order_relaxed) & subsys) != 0;
}

const char* baseName(const char* path) {
  if (path == nullptr) return "?";
  const char* slash = strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// Line prefix per level, after the optional timestamp (layouts from nccl-env.md §2).
size_t formatPrefix(LogLevel level, const char* file, int line, char* out, size_t size) {
  int pid = getpid();
  int tid = currentTid();
  int n = 0;
  switch (level) {
    case LogLevel::Warn:
      n = snprintf(out, size, "%s:%d:%d [%d] %s:%d NCCL WARN ", gHost.c_str(), pid, tid, tLogDevice,
                   baseName(file), line);
      break;
    case LogLevel::Trace: {
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - gEpoch).count();
      n = snprintf(out, size, "%s:%d:%d [%d] %f %s:%d NCCL TRACE ", gHost.c_str(), pid, tid, tLogDevice,
                   ms, baseName(file), line);
      break;
    }
    case LogLevel::Version:
      break;  // bare text, like the banner
    case LogLevel::Abort:
      n = snprintf(out, size, "%s:%d:%d [%d] %s:%d NCCL ABORT ", gHost.c_str(), pid, tid, tLogDevice,
                   baseName(file), line);
      break;
    default:
      n = snprintf(out, size, "%s:%d:%d [%d] NCCL INFO ", gHost.c_str(), pid, tid, tLogDevice);
      break;
  }
  return n > 0 ? std::min(static_cast<size_t>(n), size - 1) : 0;
}

}  // namespace

bool logEnabled(LogLevel level, uint64_t subsys) {
  return levelAndSubsysEnabled(currentLevel(), level, subsys);
}

namespace {
std::atomic<LogSink> gSink{nullptr};
}  // namespace

void setLogSink(LogSink sink) { gSink.store(sink, std::memory_order_release); }

namespace {
void logMessageV(LogLevel level, uint64_t subsys, const char* file, int line, bool lastError, const char* fmt,
                 va_list args) __attribute__((format(printf, 6, 0)));
}  // namespace

void logMessage(LogLevel level, uint64_t subsys, const char* file, int line, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  logMessageV(level, subsys, file, line, true, fmt, args);
  va_end(args);
}

void logWarnAside(const char* file, int line, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  logMessageV(LogLevel::Warn, kSubsysAll, file, line, false, fmt, args);
  va_end(args);
}

namespace {
void logMessageV(LogLevel level, uint64_t subsys, const char* file, int line, bool lastError, const char* fmt,
                 va_list args) {
  if (LogSink sink = gSink.load(std::memory_order_acquire)) {
    char message[kMessageMax];
    vsnprintf(message, sizeof(message), fmt, args);
    sink(level, subsys, file, line, message);
    return;
  }
  int current = currentLevel();
  bool print = levelAndSubsysEnabled(current, level, subsys);
  // A WARN is formatted even when silent: ncclGetLastError must see it.
  if (!print && !(level == LogLevel::Warn && lastError)) return;

  char message[kMessageMax];
  vsnprintf(message, sizeof(message), fmt, args);

  std::lock_guard<std::mutex> lock(gMutex);
  if (level == LogLevel::Warn && lastError) {
    snprintf(gLastError, sizeof(gLastError), "%s", message);
    RecentWarn& w = gRecentWarns[gRecentNext];
    gRecentNext = (gRecentNext + 1) % kRecentWarns;
    w.atMs = monotonicMs();
    w.thread = callingThread();
    snprintf(w.text, sizeof(w.text), "%s", message);
  }
  if (!print) return;

  char text[kLineMax];
  size_t len = 0;
  if (level == LogLevel::Warn) text[len++] = '\n';  // NCCL sets WARNs apart with a blank line
  len += formatTimestamp(level, text + len, sizeof(text) - len);
  len += formatPrefix(level, file, line, text + len, sizeof(text) - len);
  int n = snprintf(text + len, sizeof(text) - len, "%s\n", message);
  if (n > 0) len = std::min(len + n, sizeof(text) - 1);
  if (len > 0 && text[len - 1] != '\n') text[len - 1] = '\n';  // a cut line still ends
  writeLineLocked(text, len);

  // NCCL_WARN_ENABLE_DEBUG_INFO: after the first printed WARN, show INFO for the rest.
  if (level == LogLevel::Warn && gWarnRaisesToInfo && current < static_cast<int>(LogLevel::Info)) {
    gLevel.store(static_cast<int>(LogLevel::Info), std::memory_order_release);
  }
}

}  // namespace

namespace {
// Whether `text` says "rank N" for this N (not "rank N0").
bool namesRank(const char* text, int n) {
  const std::string name = "rank " + std::to_string(n);
  for (const char* p = std::strstr(text, name.c_str()); p; p = std::strstr(p + 1, name.c_str())) {
    const char next = p[name.size()];
    if (next < '0' || next > '9') return true;
  }
  return false;
}
}  // namespace

namespace {
// Recent WARN `w` was logged on thread `me` or begins "rank R:" / "rank R of".
bool concernsRank(const RecentWarn& w, long me, const std::string& mine) {
  const bool named = std::strncmp(w.text, mine.c_str(), mine.size()) == 0 &&
                     (w.text[mine.size()] == ':' || std::strncmp(w.text + mine.size(), " of", 3) == 0);
  return w.thread == me || named;
}
}  // namespace

std::string firstRecentWarnFor(int rank, int withinMs, int naming) {
  const int64_t since = monotonicMs() - withinMs;
  const long me = callingThread();
  const std::string mine = "rank " + std::to_string(rank);
  std::lock_guard<std::mutex> lock(gMutex);
  for (int i = 0; i < kRecentWarns; i++) {  // oldest first
    const RecentWarn& w = gRecentWarns[(gRecentNext + i) % kRecentWarns];
    if (w.atMs == 0 || w.atMs < since) continue;
    if (concernsRank(w, me, mine) && (naming < 0 || namesRank(w.text, naming))) return w.text;
  }
  return "";
}

std::string latestRecentWarnFor(int rank, int withinMs) {
  const int64_t since = monotonicMs() - withinMs;
  const long me = callingThread();
  const std::string mine = "rank " + std::to_string(rank);
  std::lock_guard<std::mutex> lock(gMutex);
  for (int i = kRecentWarns - 1; i >= 0; i--) {  // newest first
    const RecentWarn& w = gRecentWarns[(gRecentNext + i) % kRecentWarns];
    if (w.atMs == 0 || w.atMs < since) continue;
    if (concernsRank(w, me, mine)) return w.text;
  }
  return "";
}

const char* lastErrorText() {
  std::lock_guard<std::mutex> lock(gMutex);
  memcpy(tLastErrorCopy, gLastError, sizeof(tLastErrorCopy));
  return tLastErrorCopy;
}

void resetLogInit() {
  std::lock_guard<std::mutex> lock(gMutex);
  closeLogFile();
  gLevel.store(kLevelUninitialised, std::memory_order_release);
}

void setLogDevice(int dev) { tLogDevice = dev; }

}  // namespace accl
