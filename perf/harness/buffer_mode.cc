#include "buffer_mode.h"

namespace accl::perf {
namespace {

bool isSet(const char* v) { return v && *v && std::string(v) != "0"; }

}  // namespace

BufferRequest bufferRequest(BufferRequest flag, const char* hostEnv, const char* deviceEnv) {
  if (flag != BufferRequest::kAuto) return flag;
  if (isSet(hostEnv)) return BufferRequest::kHost;
  if (isSet(deviceEnv)) return BufferRequest::kDevice;
  return BufferRequest::kAuto;
}

bool wantsDriver(BufferRequest request, const std::string& backendSetting) {
  return request != BufferRequest::kHost && backendSetting != "host";
}

BufferMode decideBufferMode(BufferRequest request, const BufferFacts& facts) {
  BufferMode m;
  std::string hostWhy;
  if (request == BufferRequest::kHost) {
    hostWhy = "asked for (--host or ACCL_PERF_HOST=1)";
  } else if (facts.backendSetting == "host") {
    hostWhy = "ACCL_BACKEND=host";
  } else if (!facts.driverLoaded) {
    hostWhy = facts.driverWhy.empty() ? "no CUDA driver" : facts.driverWhy;
  } else if (facts.deviceCount <= 0) {
    hostWhy = "no CUDA device visible";
  } else if (facts.probeFailed) {
    m.why = "unknown";
    m.error = "cannot tell whether the library's ncclMemAlloc gives device or host memory: " + facts.probeWhy +
              " (--host runs on host memory)";
    return m;
  } else if (!facts.probed || !facts.libraryGivesDeviceMemory) {
    hostWhy = "the library's ncclMemAlloc gives host memory, so it runs its host backend" +
              (facts.probeWhy.empty() ? std::string() : " (" + facts.probeWhy + ")") +
              "; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT says why";
  } else {
    m.device = true;
    m.why = "device memory (ncclMemAlloc) on CUDA streams, " + std::to_string(facts.deviceCount) +
            " CUDA device(s) visible";
    return m;
  }
  m.why = "host memory on ACCL host streams: " + hostWhy;
  if (request == BufferRequest::kDevice) m.error = "--device (ACCL_PERF_DEVICE=1) cannot be honoured: " + hostWhy;
  return m;
}

}  // namespace accl::perf
