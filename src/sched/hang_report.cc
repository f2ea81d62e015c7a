// Hang reports: one self-contained block per stuck operation, naming the communicator, the
// operation (sequence number, collective, size), the step it is on and the peers it waits for.
#include <signal.h>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <sstream>
#include "sched/work.h"

namespace accl {
namespace {

std::atomic<uint64_t> gReportRequests{0};

void onSigusr1(int) { gReportRequests.fetch_add(1, std::memory_order_relaxed); }

const char* stepName(Step::Kind k) {
  switch (k) {
    case Step::Kind::Send: return "send";
    case Step::Kind::Recv: return "recv";
    case Step::Kind::RecvReduce: return "recv+reduce";
    case Step::Kind::RecvReduceSend: return "recv+reduce+send";
    case Step::Kind::RecvCopySend: return "recv+forward";
    case Step::Kind::Copy: return "copy";
    case Step::Kind::Scale: return "scale";
    case Step::Kind::Divide: return "divide";
    case Step::Kind::Accumulate: return "accumulate";
    case Step::Kind::BoardReduce: return "board reduce";
    case Step::Kind::BoardGather: return "board gather";
    case Step::Kind::BoardReadGather: return "board in-place read gather";
    case Step::Kind::BoardSliceReduce: return "board sliced reduce";
  }
  return "?";
}

}  // namespace

uint64_t hangReportRequests() { return gReportRequests.load(std::memory_order_relaxed); }

void installHangReportSignal() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = onSigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  });
}

std::string hangReport(const CommWork& w, int64_t nowUsec) {
  const Comm& c = *w.comm;
  std::ostringstream out;
  out << "ACCL hang report: rank " << c.rank << "/" << c.nranks << " comm " << static_cast<const void*>(&c);
  if (!c.config.commName.empty()) out << " (" << c.config.commName << ")";
  out << " op #" << w.ticket << ":";
  for (const auto& op : w.ops) out << " " << op->describe();
  out << "; no progress for " << (nowUsec - w.lastProgressUsec) / 1000 << " ms";
  if (!w.started) {
    out << "; not started: waiting for op #" << c.doneTicket.load() << " of this communicator to finish";
    return out.str();
  }
  out << "; phase " << w.phase + 1 << "/" << w.phases.size();
  if (w.phase < w.phases.size()) {
    const auto& lanes = w.phases[w.phase];
    for (size_t i = 0; i < lanes.size(); i++) {
      const Lane& lane = lanes[i];
      const Step* s = lane.current();
      if (lane.finished() || s == nullptr) continue;
      out << "\n  lane " << i << ": " << stepName(s->kind) << " " << lane.currentDone() << "/" << s->bytes
          << " bytes";
      if (lane.waitingRecvFrom() >= 0) out << ", waiting for data from rank " << lane.waitingRecvFrom();
      if (lane.waitingSendTo() >= 0) out << ", waiting for rank " << lane.waitingSendTo() << " to drain";
    }
  }
  return out.str();
}

}  // namespace accl
