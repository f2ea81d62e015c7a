// accl.h host streams and events.
#include "api/api.h"
#include "base/log.h"
#include "device/host_stream.h"

using namespace accl;

namespace {
HostStream* streamArg(const char* fn, cudaStream_t s) {
  HostStream* hs = s ? lookupHostStream(s) : nullptr;
  if (hs == nullptr) WARN("%s: stream %p is not a live ACCL host stream", fn, static_cast<void*>(s));
  return hs;
}
HostEvent* eventArg(const char* fn, ncclHostEvent_t e) {
  if (e == nullptr || !isHostEvent(e)) {
    WARN("%s: event %p is not a live ACCL host event", fn, static_cast<void*>(e));
    return nullptr;
  }
  return reinterpret_cast<HostEvent*>(e);
}
}  // namespace

NCCL_API(ncclResult_t, ncclHostStreamCreate, cudaStream_t* stream) {
  if (stream == nullptr) {
    WARN("ncclHostStreamCreate: stream pointer is NULL");
    return ncclInvalidArgument;
  }
  *stream = reinterpret_cast<cudaStream_t>(createHostStream());
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclHostStreamDestroy, cudaStream_t stream) {
  HostStream* hs = streamArg("ncclHostStreamDestroy", stream);
  if (!hs) return ncclInvalidArgument;
  destroyHostStream(hs);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclHostStreamSynchronize, cudaStream_t stream) {
  HostStream* hs = streamArg("ncclHostStreamSynchronize", stream);
  return hs ? hs->synchronize() : ncclInvalidArgument;
}

NCCL_API(ncclResult_t, ncclHostStreamQuery, cudaStream_t stream) {
  HostStream* hs = streamArg("ncclHostStreamQuery", stream);
  return hs ? hs->query() : ncclInvalidArgument;
}

NCCL_API(ncclResult_t, ncclHostStreamWaitEvent, cudaStream_t stream, ncclHostEvent_t event) {
  HostStream* hs = streamArg("ncclHostStreamWaitEvent", stream);
  HostEvent* ev = eventArg("ncclHostStreamWaitEvent", event);
  if (!hs || !ev) return ncclInvalidArgument;
  ev->makeWait(hs);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclHostEventCreate, ncclHostEvent_t* event) {
  if (event == nullptr) {
    WARN("ncclHostEventCreate: event pointer is NULL");
    return ncclInvalidArgument;
  }
  *event = reinterpret_cast<ncclHostEvent_t>(createHostEvent());
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclHostEventDestroy, ncclHostEvent_t event) {
  HostEvent* ev = eventArg("ncclHostEventDestroy", event);
  if (!ev) return ncclInvalidArgument;
  destroyHostEvent(ev);  // queued records/waits keep their own reference
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclHostEventRecord, ncclHostEvent_t event, cudaStream_t stream) {
  HostEvent* ev = eventArg("ncclHostEventRecord", event);
  HostStream* hs = streamArg("ncclHostEventRecord", stream);
  if (!ev || !hs) return ncclInvalidArgument;
  ev->record(hs);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclHostEventQuery, ncclHostEvent_t event) {
  HostEvent* ev = eventArg("ncclHostEventQuery", event);
  return ev ? ev->query() : ncclInvalidArgument;
}

NCCL_API(ncclResult_t, ncclHostEventSynchronize, ncclHostEvent_t event) {
  HostEvent* ev = eventArg("ncclHostEventSynchronize", event);
  if (!ev) return ncclInvalidArgument;
  ev->synchronize();
  return ncclSuccess;
}
