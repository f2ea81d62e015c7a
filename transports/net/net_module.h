// net_module.h: the seam between ACCL and a network between hosts, shaped like NCCL's ncclNet
// so that an external plugin (any ABI version, adapted in transports/plugin/) and our own
// modules are interchangeable. A module moves whole messages: the receiver posts buffers,
// the sender's messages fill them in order. transports/net/net_connection.h turns a pair of
// message comms into the byte ring the algorithms use (transports/transport.h).
//
// Calls follow ncclNet's contract: connect/accept never block (they return success with a
// null comm until the connection is up), isend/irecv may return a null request ("try again"),
// and test() drives progress.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include "nccl.h"

namespace accl::net {

inline constexpr size_t kNetHandleBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE
inline constexpr int kPtrHost = 0x1;             // NCCL_PTR_HOST
inline constexpr int kPtrCuda = 0x2;             // NCCL_PTR_CUDA

// What getProperties reports, in the newest ABI's terms; older ABIs fill what they have.
struct NetProps {
  std::string name;
  std::string pciPath;
  uint64_t guid = 0;
  int ptrSupport = kPtrHost;
  int regIsGlobal = 0;
  int speedMbps = 0;
  int port = 0;
  float latency = 0;
  int maxComms = 0;
  int maxRecvs = 1;
  size_t maxP2pBytes = 0;  // 0 = no limit known
};

class NetModule {
 public:
  virtual ~NetModule() = default;
  virtual const char* name() const = 0;
  // Where it came from, for INFO lines: "internal", or the plugin file and ABI version.
  virtual std::string origin() const = 0;

  // Process-wide setup, called once before anything else.
  virtual ncclResult_t init() = 0;
  virtual ncclResult_t devices(int* ndev) = 0;
  virtual ncclResult_t getProperties(int dev, NetProps* props) = 0;

  // Per communicator context (ncclNet v11 init/finalize); older ABIs have none (nullptr).
  virtual ncclResult_t openContext(uint64_t commId, void** ctx) {
    (void)commId;
    *ctx = nullptr;
    return ncclSuccess;
  }
  virtual ncclResult_t closeContext(void* ctx) {
    (void)ctx;
    return ncclSuccess;
  }

  // `handle` holds kNetHandleBytes; listen fills it, the peer passes it to connect.
  virtual ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) = 0;
  virtual ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm) = 0;
  virtual ncclResult_t accept(void* listenComm, void** recvComm) = 0;
  virtual ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual ncclResult_t deregMr(void* comm, void* mhandle) = 0;
  virtual ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  // One buffer per receive (ACCL never groups receives).
  virtual ncclResult_t irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  // *size (when done) = bytes moved.
  virtual ncclResult_t test(void* request, int* done, size_t* size) = 0;
  virtual ncclResult_t closeSend(void* sendComm) = 0;
  virtual ncclResult_t closeRecv(void* recvComm) = 0;
  virtual ncclResult_t closeListen(void* listenComm) = 0;
};

}  // namespace accl::net
