// -G (nccl-tests' CUDA-graph mode): the ranks' streams are captured while the timed
// iterations are issued, each capture becomes one executable graph, and the graphs are then
// launched n times. The graph entry points come from the driver the session already opened,
// looked up only when -G is used (the library's driver table has no use for them).
#pragma once

#include <string>
#include <vector>

#include "cuda_session.h"

namespace accl::perf {

class StreamGraphs {
 public:
  // CUstreamCaptureMode values.
  enum class CaptureMode : int { kGlobal = 0, kThreadLocal = 1 };

  // True when the driver has every entry point; else *why names the missing one.
  static bool available(std::string* why);

  // `cuda` (for error texts) may be null while nothing is captured.
  explicit StreamGraphs(const CudaSession* cuda) : cuda_(cuda) {}
  StreamGraphs(const StreamGraphs&) = delete;
  StreamGraphs& operator=(const StreamGraphs&) = delete;
  ~StreamGraphs();  // destroys the graphs; the caller has waited for their launches

  // Starts capturing on each stream. false with *error naming the failing call.
  bool begin(const std::vector<cudaStream_t>& streams, CaptureMode mode, std::string* error);
  // Ends every capture begun and instantiates one graph per stream.
  bool end(std::string* error);
  // Launches each graph once on the stream it was captured on.
  bool launch(std::string* error);

 private:
  const CudaSession* cuda_;
  std::vector<cudaStream_t> streams_;
  std::vector<void*> graphs_;  // CUgraph, by stream
  std::vector<void*> execs_;   // CUgraphExec, by stream
};

}  // namespace accl::perf
