// capture_modes.cc: the rules of stream capture modes (cuStreamBeginCapture's mode and the
// per-thread mode of cuThreadExchangeStreamCaptureMode). While a capture is under way, calls
// that are "potentially unsafe" (they act at once instead of being queued, so a graph could not
// replay them: allocations, frees, host registration, IPC mappings, module loading, context
// synchronization) are refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the capture that
// forbids them is invalidated (cuStreamEndCapture then fails with
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED), as the CUDA documentation states. A thread in mode
//   GLOBAL (the default): is refused while it has begun a capture that is not RELAXED, or while
//     any other thread has a GLOBAL capture under way;
//   THREAD_LOCAL: only while it has begun a capture that is not RELAXED;
//   RELAXED: never (NCCL puts its own threads in this mode).
#include <algorithm>
#include "internal.h"

namespace fakecuda {
namespace {

thread_local CUstreamCaptureMode tMode = CU_STREAM_CAPTURE_MODE_GLOBAL;

struct OpenCaptures {
  std::mutex mu;
  std::vector<std::shared_ptr<Graph>> graphs;
};
OpenCaptures& open() {
  static OpenCaptures* o = new OpenCaptures;
  return *o;
}

const char* modeName(CUstreamCaptureMode m) {
  switch (m) {
    case CU_STREAM_CAPTURE_MODE_GLOBAL: return "global";
    case CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: return "thread-local";
    case CU_STREAM_CAPTURE_MODE_RELAXED: return "relaxed";
  }
  return "?";
}

}  // namespace

void captureBegan(const std::shared_ptr<Graph>& g) {
  std::lock_guard<std::mutex> lock(open().mu);
  open().graphs.push_back(g);
}

void captureEnded(const Graph* g) {
  std::lock_guard<std::mutex> lock(open().mu);
  auto& v = open().graphs;
  v.erase(std::remove_if(v.begin(), v.end(), [g](const std::shared_ptr<Graph>& x) { return x.get() == g; }), v.end());
}

CUresult refuseIfCaptureForbids(const char* call) {
  if (tMode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  const std::thread::id self = std::this_thread::get_id();
  std::vector<std::shared_ptr<Graph>> forbidding;
  {
    std::lock_guard<std::mutex> lock(open().mu);
    for (const auto& g : open().graphs) {
      const bool mine = g->owner == self && g->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
      const bool othersGlobal = g->owner != self && g->mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                                tMode == CU_STREAM_CAPTURE_MODE_GLOBAL;
      if (mine || othersGlobal) forbidding.push_back(g);
    }
  }
  if (forbidding.empty()) return CUDA_SUCCESS;
  for (const auto& g : forbidding) {
    const bool already = g->invalidated.exchange(true);
    void* stream = nullptr;
    {
      std::lock_guard<std::mutex> lock(g->mu);
      if (!g->members.empty()) stream = g->members.front();
    }
    report("%s during a %s-mode stream capture of stream %p begun by %s (this thread's capture mode: %s): "
           "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; the capture is %sinvalidated. Allocate/register/map/load "
           "before capturing, or call it from a thread in CU_STREAM_CAPTURE_MODE_RELAXED "
           "(cuThreadExchangeStreamCaptureMode)",
           call, modeName(g->mode), stream, g->owner == self ? "this thread" : "another thread", modeName(tMode),
           already ? "already " : "");
  }
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

}  // namespace fakecuda

using namespace fakecuda;

FAKE_CUDA_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  noteCall("cuThreadExchangeStreamCaptureMode");
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      *mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, tMode);
  return CUDA_SUCCESS;
}
