// Where a perf run keeps its buffers: device memory on CUDA streams when a CUDA device is
// usable and the library under test hands out device memory from ncclMemAlloc, else host
// memory on ACCL host streams. The decision is a pure function of what was found, so it is
// unit-tested without a driver; cuda_session.cc gathers the facts.
#pragma once

#include <string>

namespace accl::perf {

enum class BufferRequest { kAuto, kHost, kDevice };  // --host / --device, ACCL_PERF_HOST / ACCL_PERF_DEVICE

// --host or --device on the command line wins; else ACCL_PERF_HOST=1 / ACCL_PERF_DEVICE=1;
// else auto. `flag` is what the command line said (kAuto when nothing).
BufferRequest bufferRequest(BufferRequest flag, const char* hostEnv, const char* deviceEnv);

struct BufferFacts {
  std::string backendSetting;  // ACCL_BACKEND
  bool driverLoaded = false;
  std::string driverWhy;       // why not, when it did not load
  int deviceCount = 0;
  bool probed = false;         // ncclMemAlloc was tried on a device
  bool libraryGivesDeviceMemory = false;  // ... and returned device memory
  bool probeFailed = false;    // ... but could not tell (no context, ncclMemAlloc failed)
  std::string probeWhy;        // what the probe found, when it did not give device memory
};

struct BufferMode {
  bool device = false;
  std::string why;    // the "# Buffers: ..." line's text after the colon
  // Non-empty: the run stops. --device cannot be had, or the probe failed: then where
  // ncclMemAlloc puts memory is unknown, and host mode could write into device memory.
  std::string error;
};

// Whether the facts are worth gathering at all (no driver load for --host or ACCL_BACKEND=host).
// --host also sets ACCL_BACKEND=host for the library (chooseBufferMode), so that its
// ncclMemAlloc hands out host memory.
bool wantsDriver(BufferRequest request, const std::string& backendSetting);
BufferMode decideBufferMode(BufferRequest request, const BufferFacts& facts);

}  // namespace accl::perf
