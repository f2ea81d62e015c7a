#include "base/trace.h"
#include <unistd.h>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include "base/log.h"
#include "base/param.h"

namespace accl {
namespace {

struct CommTrace {
  int rank = 0;
  int nranks = 0;
  std::deque<OpTraceRecord> ops;
};

std::mutex gTraceMu;
std::map<const void*, CommTrace>& traces() {
  static std::map<const void*, CommTrace> t;
  return t;
}

// %h -> short host name, %p -> pid, like NCCL_DEBUG_FILE.
std::string expandPath(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); i++) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[++i];
      if (c == 'p') {
        out += std::to_string(getpid());
        continue;
      }
      if (c == 'h') {
        char host[256] = {};
        gethostname(host, sizeof(host) - 1);
        std::string h(host);
        out += h.substr(0, h.find('.'));
        continue;
      }
      if (c == '%') {
        out += '%';
        continue;
      }
      out += '%';
    }
    out += pattern[i];
  }
  return out;
}

void writeEscaped(FILE* f, const std::string& s) {
  for (char c : s) {
    if (c == '"' || c == '\\') fputc('\\', f);
    fputc(c, f);
  }
}

}  // namespace

bool traceEnabled() {
  static const bool enabled = !param::traceFile().empty();
  return enabled;
}

void traceRecord(const void* comm, int rank, int nranks, const OpTraceRecord& rec) {
  std::lock_guard<std::mutex> lk(gTraceMu);
  CommTrace& t = traces()[comm];
  t.rank = rank;
  t.nranks = nranks;
  t.ops.push_back(rec);
  while (t.ops.size() > static_cast<size_t>(param::traceDepth())) t.ops.pop_front();
}

void traceFlush() {
  if (!traceEnabled()) return;
  std::string path = expandPath(param::traceFile());
  std::lock_guard<std::mutex> lk(gTraceMu);
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) {
    WARN("ACCL_TRACE_FILE: cannot write %s", path.c_str());
    return;
  }
  fprintf(f, "{\"traceEvents\":[\n");
  bool first = true;
  int pid = getpid();
  for (auto& [comm, t] : traces()) {
    for (const OpTraceRecord& r : t.ops) {
      fprintf(f, "%s{\"name\":\"", first ? "" : ",\n");
      writeEscaped(f, r.name);
      fprintf(f,
              "\",\"cat\":\"accl\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%lld,\"dur\":%lld,"
              "\"args\":{\"comm\":\"%p\",\"rank\":%d,\"nranks\":%d,\"seq\":%llu,\"result\":%d}}",
              pid, t.rank, static_cast<long long>(r.startUsec),
              static_cast<long long>(r.endUsec > r.startUsec ? r.endUsec - r.startUsec : 0), comm, t.rank, t.nranks,
              static_cast<unsigned long long>(r.seq), r.result);
      first = false;
    }
  }
  fprintf(f, "\n],\"displayTimeUnit\":\"ms\"}\n");
  fclose(f);
}

}  // namespace accl
