// net_accl_plugin.cc: libnccl-net-accl.so, ACCL's socket module (transports/socket/socket_net.h)
// as an external net plugin for any NCCL-compatible host (NCCL itself, or ACCL through
// NCCL_NET_PLUGIN=accl). Exports ncclNetPlugin_v11, _v10, _v8 and _v6 so hosts from NCCL 2.12
// on find a version they know; every table forwards to the same module.
#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include "base/log.h"
#include "nccl_net.h"
#include "transports/socket/socket_net.h"

namespace {

using accl::net::NetModule;
using accl::net::NetProps;

NetModule& module() {
  static std::unique_ptr<NetModule> m = accl::net::makeSocketNetModule();
  return *m;
}

// Property strings must outlive the call: one copy per device, kept for the process.
char* keep(int dev, const std::string& name) {
  static std::mutex mu;
  static std::string names[16];
  std::lock_guard<std::mutex> lk(mu);
  std::string& slot = names[dev & 15];
  slot = name;
  return slot.data();
}

template <typename P>
ncclResult_t props(int dev, P* p) {
  NetProps np;
  ncclResult_t res = module().getProperties(dev, &np);
  if (res != ncclSuccess) return res;
  *p = P{};
  p->name = keep(dev, np.name);
  p->pciPath = nullptr;
  p->guid = np.guid;
  p->ptrSupport = np.ptrSupport;
  p->speed = np.speedMbps;
  p->port = np.port;
  p->latency = np.latency;
  p->maxComms = np.maxComms;
  p->maxRecvs = np.maxRecvs;
  if constexpr (requires { p->netDeviceType; }) p->netDeviceType = NCCL_NET_DEVICE_HOST;
  if constexpr (requires { p->maxP2pBytes; }) p->maxP2pBytes = p->maxCollBytes = NCCL_MAX_NET_SIZE_BYTES;
  if constexpr (requires { p->maxMultiRequestSize; }) p->maxMultiRequestSize = 1;
  return ncclSuccess;
}

// The host's logger, for every line the module writes (the host decides level and file).
std::atomic<ncclDebugLogger_t> hostLogger{nullptr};
void toHost(accl::LogLevel level, uint64_t subsys, const char* file, int line, const char* text) {
  if (ncclDebugLogger_t log = hostLogger.load()) log(static_cast<ncclDebugLogLevel>(level), subsys, file, line, "%s", text);
}

ncclResult_t init(ncclDebugLogger_t log) {
  if (log) {
    hostLogger.store(log);
    accl::setLogSink(toHost);
  }
  return module().init();
}
ncclResult_t initLegacy(ncclDebugLogger_t log) { return init(log); }
ncclResult_t initV10(ncclDebugLogger_t log, ncclProfilerCallback_t) { return init(log); }
ncclResult_t initV11(void** ctx, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t log, ncclProfilerCallback_t) {
  static int token;
  *ctx = &token;  // no per-communicator state
  return init(log);
}
ncclResult_t finalizeV11(void*) { return ncclSuccess; }
ncclResult_t devices(int* n) { return module().devices(n); }
ncclResult_t listen(int dev, void* handle, void** lc) { return module().listen(nullptr, dev, handle, lc); }
ncclResult_t listenV11(void*, int dev, void* handle, void** lc) { return listen(dev, handle, lc); }
ncclResult_t connect(int dev, void* handle, void** sc) { return module().connect(nullptr, dev, handle, sc); }
ncclResult_t connectDev(int dev, void* handle, void** sc, ncclNetDeviceHandle_v11_t**) { return connect(dev, handle, sc); }
ncclResult_t connectV10(int dev, ncclNetCommConfig_v10_t*, void* handle, void** sc, ncclNetDeviceHandle_v10_t**) {
  return connect(dev, handle, sc);
}
ncclResult_t connectV11(void*, int dev, void* handle, void** sc, ncclNetDeviceHandle_v11_t**) {
  return connect(dev, handle, sc);
}
ncclResult_t accept(void* lc, void** rc) { return module().accept(lc, rc); }
ncclResult_t acceptDev(void* lc, void** rc, ncclNetDeviceHandle_v11_t**) { return accept(lc, rc); }
ncclResult_t regMr(void* c, void* d, size_t s, int t, void** mh) { return module().regMr(c, d, s, t, mh); }
ncclResult_t regMrInt(void* c, void* d, int s, int t, void** mh) { return regMr(c, d, static_cast<size_t>(s), t, mh); }
ncclResult_t regMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return ncclInternalError; }
ncclResult_t deregMr(void* c, void* mh) { return module().deregMr(c, mh); }
ncclResult_t isend(void* c, void* d, size_t s, int tag, void* mh, void** req) { return module().isend(c, d, s, tag, mh, req); }
ncclResult_t isendInt(void* c, void* d, int s, int tag, void* mh, void** req) {
  return isend(c, d, static_cast<size_t>(s), tag, mh, req);
}
ncclResult_t isendV10(void* c, void* d, size_t s, int tag, void* mh, void*, void** req) {
  return isend(c, d, s, tag, mh, req);
}
ncclResult_t irecvOne(void* c, int n, void** d, size_t s, int* tags, void** mh, void** req) {
  if (n != 1) return ncclInternalError;  // maxRecvs is 1
  return module().irecv(c, d[0], s, tags ? tags[0] : 0, mh ? mh[0] : nullptr, req);
}
ncclResult_t irecvInt(void* c, int n, void** d, int* s, int* tags, void** mh, void** req) {
  return irecvOne(c, n, d, static_cast<size_t>(s[0]), tags, mh, req);
}
ncclResult_t irecvV10(void* c, int n, void** d, size_t* s, int* tags, void** mh, void**, void** req) {
  return irecvOne(c, n, d, s[0], tags, mh, req);
}
ncclResult_t iflush(void*, int, void**, int*, void**, void** req) {
  *req = nullptr;  // host memory: nothing to flush
  return ncclSuccess;
}
ncclResult_t test(void* req, int* done, int* sizes) {
  size_t size = 0;
  ncclResult_t res = module().test(req, done, &size);
  if (res == ncclSuccess && *done && sizes) *sizes = size > INT_MAX ? INT_MAX : static_cast<int>(size);
  return res;
}
ncclResult_t closeSend(void* c) { return module().closeSend(c); }
ncclResult_t closeRecv(void* c) { return module().closeRecv(c); }
ncclResult_t closeListen(void* c) { return module().closeListen(c); }
ncclResult_t getDeviceMr(void*, void*, void**) { return ncclInternalError; }
ncclResult_t irecvConsumed(void*, int, void*) { return ncclSuccess; }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) extern const ncclNet_v11_t ncclNetPlugin_v11;
__attribute__((visibility("default"))) extern const ncclNet_v10_t ncclNetPlugin_v10;
__attribute__((visibility("default"))) extern const ncclNet_v8_t ncclNetPlugin_v8;
__attribute__((visibility("default"))) extern const ncclNet_v6_t ncclNetPlugin_v6;

const ncclNet_v11_t ncclNetPlugin_v11 = {
    "Socket", initV11, devices, props<ncclNetProperties_v11_t>, listenV11, connectV11, acceptDev, regMr, regMrDmaBuf,
    deregMr, isendV10, irecvV10, iflush, test, closeSend, closeRecv, closeListen, getDeviceMr, irecvConsumed,
    nullptr, finalizeV11, nullptr};
const ncclNet_v10_t ncclNetPlugin_v10 = {
    "Socket", initV10, devices, props<ncclNetProperties_v10_t>, listen, connectV10, acceptDev, regMr, regMrDmaBuf,
    deregMr, isendV10, irecvV10, iflush, test, closeSend, closeRecv, closeListen, getDeviceMr, irecvConsumed,
    nullptr};
const ncclNet_v8_t ncclNetPlugin_v8 = {
    "Socket", initLegacy, devices, props<ncclNetProperties_v8_t>, listen, connectDev, acceptDev, regMr, regMrDmaBuf,
    deregMr, isendInt, irecvInt, iflush, test, closeSend, closeRecv, closeListen, getDeviceMr, irecvConsumed};
const ncclNet_v6_t ncclNetPlugin_v6 = {
    "Socket", initLegacy, devices, props<ncclNetProperties_v6_t>, listen, connect, accept, regMrInt, regMrDmaBuf,
    deregMr, isendInt, irecvInt, iflush, test, closeSend, closeRecv, closeListen};

}  // extern "C"
