// trace.h: the last operations of each communicator, for ACCL_TRACE_FILE (Chrome-trace JSON,
// readable by Perfetto) and for post-mortems. Recording is a few stores per operation and
// happens only when ACCL_TRACE_FILE is set.
#pragma once
#include <cstdint>
#include <string>

namespace accl {

struct OpTraceRecord {
  uint64_t seq;          // the communicator's op sequence number (ticket)
  std::string name;      // e.g. "AllReduce 16777216 x float32"
  int64_t startUsec;     // steady clock
  int64_t endUsec;
  int result;            // ncclResult_t
};

bool traceEnabled();
// Called by the executor when one communicator's work finishes.
void traceRecord(const void* comm, int rank, int nranks, const OpTraceRecord& rec);
// Rewrites ACCL_TRACE_FILE with everything recorded so far (called on destroy/abort).
void traceFlush();

}  // namespace accl
