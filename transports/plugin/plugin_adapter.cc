// plugin_adapter.cc: one NetModule over any ncclNet_vN_t table (N = 6..11). The versions
// differ in small ways (see include/nccl_net.h): how init is called (v11 per communicator,
// v10 with a profiler callback, older with the logger only), whether connect/accept take a
// device-handle out-parameter (v7+), whether sizes are int (regMr up to v7, isend/irecv up
// to v8) and which properties exist. Everything else is passed straight through.
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <utility>
#include "base/check.h"
#include "nccl_net.h"
#include "transports/plugin/plugin_net.h"

namespace accl::net {
namespace {

// ncclDebugLogger_t for plugins: their lines go through our log (levels and subsystems match).
void pluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  logMessage(static_cast<LogLevel>(level), flags, file ? file : "plugin", line, "%s", text);
}

template <int V> struct Abi;
template <> struct Abi<11> { using Net = ncclNet_v11_t; using Props = ncclNetProperties_v11_t; };
template <> struct Abi<10> { using Net = ncclNet_v10_t; using Props = ncclNetProperties_v10_t; };
template <> struct Abi<9> { using Net = ncclNet_v9_t; using Props = ncclNetProperties_v9_t; };
template <> struct Abi<8> { using Net = ncclNet_v8_t; using Props = ncclNetProperties_v8_t; };
template <> struct Abi<7> { using Net = ncclNet_v7_t; using Props = ncclNetProperties_v7_t; };
template <> struct Abi<6> { using Net = ncclNet_v6_t; using Props = ncclNetProperties_v6_t; };

template <int V>
class PluginNet final : public NetModule {
  using Net = typename Abi<V>::Net;
  using Props = typename Abi<V>::Props;

 public:
  PluginNet(const Net* net, std::string file) : net_(net), file_(std::move(file)) {}
  ~PluginNet() override {
    if constexpr (V >= 11) {
      if (probeCtx_ && net_->finalize) net_->finalize(probeCtx_);
    }
  }
  const char* name() const override { return net_->name ? net_->name : "(unnamed)"; }
  std::string origin() const override { return file_ + " (ncclNetPlugin_v" + std::to_string(V) + ")"; }

  ncclResult_t init() override {
    if constexpr (V >= 11) {
      // v11 contexts are per communicator; one more serves devices/getProperties probes.
      ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return net_->init(&probeCtx_, 0, &config, pluginLogger, nullptr);
    } else if constexpr (V == 10) {
      return net_->init(pluginLogger, nullptr);
    } else {
      return net_->init(pluginLogger);
    }
  }
  ncclResult_t devices(int* ndev) override { return net_->devices(ndev); }
  ncclResult_t getProperties(int dev, NetProps* out) override {
    Props p{};
    NCCLCHECK(net_->getProperties(dev, &p));
    out->name = p.name ? p.name : "";
    out->pciPath = p.pciPath ? p.pciPath : "";
    out->guid = p.guid;
    out->ptrSupport = p.ptrSupport;
    out->speedMbps = p.speed;
    out->port = p.port;
    out->latency = p.latency;
    out->maxComms = p.maxComms;
    out->maxRecvs = p.maxRecvs;
    if constexpr (V >= 8) out->regIsGlobal = p.regIsGlobal;
    if constexpr (V >= 9) out->maxP2pBytes = p.maxP2pBytes;
    return ncclSuccess;
  }
  ncclResult_t openContext(uint64_t commId, void** ctx) override {
    *ctx = nullptr;
    if constexpr (V >= 11) {
      ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return net_->init(ctx, commId, &config, pluginLogger, nullptr);
    } else {
      (void)commId;
      return ncclSuccess;  // process-wide init already ran
    }
  }
  ncclResult_t closeContext(void* ctx) override {
    if constexpr (V >= 11) {
      if (ctx && net_->finalize) return net_->finalize(ctx);
    }
    (void)ctx;
    return ncclSuccess;
  }
  ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) override {
    if constexpr (V >= 11) return net_->listen(ctx, dev, handle, listenComm);
    else {
      (void)ctx;
      return net_->listen(dev, handle, listenComm);
    }
  }
  ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm) override {
    if constexpr (V >= 11) {
      ncclNetDeviceHandle_v11_t* devComm = nullptr;  // host memory: no device offload
      return net_->connect(ctx, dev, handle, sendComm, &devComm);
    } else if constexpr (V == 10) {
      (void)ctx;
      ncclNetCommConfig_v10_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      ncclNetDeviceHandle_v10_t* devComm = nullptr;
      return net_->connect(dev, &config, handle, sendComm, &devComm);
    } else if constexpr (V >= 7) {
      (void)ctx;
      ncclNetDeviceHandle_v11_t* devComm = nullptr;
      return net_->connect(dev, handle, sendComm, &devComm);
    } else {
      (void)ctx;
      return net_->connect(dev, handle, sendComm);
    }
  }
  ncclResult_t accept(void* listenComm, void** recvComm) override {
    if constexpr (V >= 7) {
      ncclNetDeviceHandle_v11_t* devComm = nullptr;
      return net_->accept(listenComm, recvComm, &devComm);
    } else {
      return net_->accept(listenComm, recvComm);
    }
  }
  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    if constexpr (V <= 7) {
      if (size > INT_MAX) return tooBig("regMr", size);
      return net_->regMr(comm, data, static_cast<int>(size), type, mhandle);
    } else {
      return net_->regMr(comm, data, size, type, mhandle);
    }
  }
  ncclResult_t deregMr(void* comm, void* mhandle) override { return net_->deregMr(comm, mhandle); }
  ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    if constexpr (V >= 10) {
      return net_->isend(sendComm, data, size, tag, mhandle, nullptr, request);
    } else if constexpr (V == 9) {
      return net_->isend(sendComm, data, size, tag, mhandle, request);
    } else {
      if (size > INT_MAX) return tooBig("isend", size);
      return net_->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request);
    }
  }
  ncclResult_t irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    void* datas[1] = {data};
    int tags[1] = {tag};
    void* mhandles[1] = {mhandle};
    if constexpr (V >= 10) {
      size_t sizes[1] = {size};
      void* phandles[1] = {nullptr};
      return net_->irecv(recvComm, 1, datas, sizes, tags, mhandles, phandles, request);
    } else if constexpr (V == 9) {
      size_t sizes[1] = {size};
      return net_->irecv(recvComm, 1, datas, sizes, tags, mhandles, request);
    } else {
      if (size > INT_MAX) return tooBig("irecv", size);
      int sizes[1] = {static_cast<int>(size)};
      return net_->irecv(recvComm, 1, datas, sizes, tags, mhandles, request);
    }
  }
  ncclResult_t test(void* request, int* done, size_t* size) override {
    int sizes[1] = {0};
    NCCLCHECK(net_->test(request, done, sizes));
    if (*done) *size = static_cast<size_t>(sizes[0] < 0 ? 0 : sizes[0]);
    return ncclSuccess;
  }
  ncclResult_t closeSend(void* c) override { return net_->closeSend(c); }
  ncclResult_t closeRecv(void* c) override { return net_->closeRecv(c); }
  ncclResult_t closeListen(void* c) override { return net_->closeListen(c); }

 private:
  ncclResult_t tooBig(const char* call, size_t size) const {
    WARN("net plugin %s: %zu bytes do not fit the int size of %s in ncclNetPlugin_v%d", name(), size, call, V);
    return ncclInvalidArgument;
  }
  const Net* net_;
  std::string file_;
  void* probeCtx_ = nullptr;
};

}  // namespace

std::unique_ptr<NetModule> adaptNetPlugin(const void* table, int version, std::string file) {
  switch (version) {
    case 11: return std::make_unique<PluginNet<11>>(static_cast<const ncclNet_v11_t*>(table), std::move(file));
    case 10: return std::make_unique<PluginNet<10>>(static_cast<const ncclNet_v10_t*>(table), std::move(file));
    case 9: return std::make_unique<PluginNet<9>>(static_cast<const ncclNet_v9_t*>(table), std::move(file));
    case 8: return std::make_unique<PluginNet<8>>(static_cast<const ncclNet_v8_t*>(table), std::move(file));
    case 7: return std::make_unique<PluginNet<7>>(static_cast<const ncclNet_v7_t*>(table), std::move(file));
    case 6: return std::make_unique<PluginNet<6>>(static_cast<const ncclNet_v6_t*>(table), std::move(file));
    default: return nullptr;
  }
}

}  // namespace accl::net
