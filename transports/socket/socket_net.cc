// socket_net.cc: the "Socket" net module (see socket_net.h).
#include "transports/socket/socket_net.h"
#include <algorithm>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <utility>
#include <vector>
#include "base/check.h"
#include "base/param.h"
#include "topo/ifaces.h"

namespace accl::net {
namespace {

constexpr uint64_t kHandleMagic = 0x4143434c534f434bull;  // "ACCLSOCK"
constexpr int kMaxRequests = 32;                            // NCCL_NET_MAX_REQUESTS
constexpr int kMaxDevices = 4;

// What listen() hands to the peer (fits NCCL_NET_HANDLE_MAXSIZE).
struct Handle {
  uint64_t magic;
  uint64_t nonce;  // the connector sends it first, so strays are told apart
  uint32_t addrLen;
  unsigned char addr[sizeof(sockaddr_in6)];
};
static_assert(sizeof(Handle) <= kNetHandleBytes);

struct ListenComm {
  Socket sock;
  uint64_t nonce;
};

struct Comm;
struct Request {
  Comm* comm = nullptr;
  bool used = false;
  bool complete = false;
  char* data = nullptr;
  size_t size = 0;
  uint64_t header = 0;  // message length
  size_t hdrDone = 0;
  size_t dataDone = 0;
};

struct Comm {
  Socket sock;
  bool isSend = false;
  bool broken = false;
  Request reqs[kMaxRequests];
  unsigned head = 0, tail = 0;  // FIFO of request slots in post order
};

void setNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

int linkSpeedMbps(const std::string& ifname) {
  std::ifstream in("/sys/class/net/" + ifname + "/speed");
  int speed = 0;
  if (in >> speed && speed > 0) return speed;
  return 10000;  // virtual links report nothing useful
}

// Moves bytes for one request; returns <0 on a dead connection, 0 if it would block.
ssize_t moveSome(Comm* c, char* buf, size_t want) {
  ssize_t n = c->isSend ? send(c->sock.fd(), buf, want, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(c->sock.fd(), buf, want, MSG_DONTWAIT);
  if (n > 0) return n;
  if (n == 0 && !c->isSend) {
    errno = 0;  // orderly EOF
    return -1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  return -1;
}

ncclResult_t progress(Comm* c) {
  if (c->broken) return ncclRemoteError;
  for (unsigned i = c->head; i != c->tail; i++) {
    Request& r = c->reqs[i % kMaxRequests];
    if (r.complete) continue;
    while (r.hdrDone < sizeof(r.header)) {
      ssize_t n = moveSome(c, reinterpret_cast<char*>(&r.header) + r.hdrDone, sizeof(r.header) - r.hdrDone);
      if (n < 0) goto broken;
      if (n == 0) return ncclSuccess;
      r.hdrDone += static_cast<size_t>(n);
    }
    if (!c->isSend && r.header > r.size) {
      WARN("NET/Socket: a %llu-byte message arrived for a %zu-byte receive (peer speaks another protocol?)",
           static_cast<unsigned long long>(r.header), r.size);
      c->broken = true;
      return ncclInternalError;
    }
    while (r.dataDone < r.header) {
      ssize_t n = moveSome(c, r.data + r.dataDone, r.header - r.dataDone);
      if (n < 0) goto broken;
      if (n == 0) return ncclSuccess;
      r.dataDone += static_cast<size_t>(n);
    }
    r.complete = true;
  }
  return ncclSuccess;
broken:
  // INFO: a peer that finished and closed looks the same; the host says when it matters.
  INFO(kSubsysNet, "NET/Socket: connection lost (%s)", errno ? strerror(errno) : "closed by the peer");
  c->broken = true;
  return ncclRemoteError;
}

class SocketNet final : public NetModule {
 public:
  const char* name() const override { return "Socket"; }
  std::string origin() const override { return "internal"; }

  ncclResult_t init() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!ifs_.empty()) return ncclSuccess;
    std::string why;
    NCCLCHECK(topo::selectInterfaces(&ifs_, kMaxDevices, &why));
    for (size_t i = 0; i < ifs_.size(); i++)
      INFO(kSubsysInit | kSubsysNet, "NET/Socket: device %zu is %s (%s)%s%s", i, ifs_[i].name.c_str(),
           ifs_[i].addr.str().c_str(), i == 0 ? ": " : "", i == 0 ? why.c_str() : "");
    return ncclSuccess;
  }
  ncclResult_t devices(int* ndev) override {
    *ndev = static_cast<int>(ifs_.size());
    return ncclSuccess;
  }
  ncclResult_t getProperties(int dev, NetProps* props) override {
    NCCLCHECK(checkDev(dev));
    props->name = ifs_[dev].name;
    props->pciPath.clear();
    props->guid = static_cast<uint64_t>(dev);
    props->ptrSupport = kPtrHost;
    props->speedMbps = linkSpeedMbps(ifs_[dev].name);
    props->maxComms = 65536;
    props->maxRecvs = 1;
    return ncclSuccess;
  }
  ncclResult_t listen(void*, int dev, void* handle, void** listenComm) override {
    NCCLCHECK(checkDev(dev));
    auto lc = std::make_unique<ListenComm>();
    SockAddr bound;
    NCCLCHECK(listenOn(ifs_[dev].addr, &lc->sock, &bound));
    setNonBlocking(lc->sock.fd());
    if (getrandom(&lc->nonce, sizeof(lc->nonce), 0) != sizeof(lc->nonce)) lc->nonce = reinterpret_cast<uintptr_t>(lc.get());
    Handle h{};
    h.magic = kHandleMagic;
    h.nonce = lc->nonce;
    h.addrLen = std::min<uint32_t>(bound.len, sizeof(h.addr));
    std::memcpy(h.addr, &bound.ss, h.addrLen);
    std::memset(handle, 0, kNetHandleBytes);
    std::memcpy(handle, &h, sizeof(h));
    *listenComm = lc.release();
    return ncclSuccess;
  }
  ncclResult_t connect(void*, int dev, void* handle, void** sendComm) override {
    NCCLCHECK(checkDev(dev));
    *sendComm = nullptr;
    Handle h;
    std::memcpy(&h, handle, sizeof(h));
    if (h.magic != kHandleMagic || h.addrLen > sizeof(h.addr)) {
      WARN("NET/Socket: connect handle is not a Socket handle (magic %llx)", static_cast<unsigned long long>(h.magic));
      return ncclInvalidArgument;
    }
    SockAddr addr;
    std::memcpy(&addr.ss, h.addr, h.addrLen);
    addr.len = h.addrLen;
    auto c = std::make_unique<Comm>();
    std::string why;
    const int timeoutMs = static_cast<int>(param::socketConnectTimeoutMsec());
    if (connectWithin(addr, &c->sock, timeoutMs, &why) != ncclSuccess) {
      WARN("NET/Socket: cannot connect to %s: %s", addr.str().c_str(), why.c_str());
      return ncclRemoteError;
    }
    NCCLCHECK(sendAll(c->sock, &h.nonce, sizeof(h.nonce), addr.str().c_str(), nullptr, timeoutMs));
    ready(c.get(), true);
    *sendComm = c.release();
    return ncclSuccess;
  }
  ncclResult_t accept(void* listenComm, void** recvComm) override {
    auto* lc = static_cast<ListenComm*>(listenComm);
    *recvComm = nullptr;
    for (;;) {
      Socket s(accept4(lc->sock.fd(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!s.valid()) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ncclSuccess;
        WARN("NET/Socket: accept failed: %s", strerror(errno));
        return ncclSystemError;
      }
      uint64_t nonce = 0;
      if (recvAll(s, &nonce, sizeof(nonce), "incoming Socket connection", nullptr, 5000) != ncclSuccess ||
          nonce != lc->nonce) {
        WARN("NET/Socket: dropped a connection that did not present this listener's nonce (stray or foreign)");
        continue;
      }
      auto c = std::make_unique<Comm>();
      c->sock = std::move(s);
      ready(c.get(), false);
      *recvComm = c.release();
      return ncclSuccess;
    }
  }
  ncclResult_t regMr(void*, void*, size_t, int type, void** mhandle) override {
    if (type != kPtrHost) {
      WARN("NET/Socket: only host memory can be registered (type %d)", type);
      return ncclInvalidArgument;
    }
    *mhandle = this;  // nothing to register for TCP; any non-null token
    return ncclSuccess;
  }
  ncclResult_t deregMr(void*, void*) override { return ncclSuccess; }
  ncclResult_t isend(void* sendComm, void* data, size_t size, int, void*, void** request) override {
    *request = post(static_cast<Comm*>(sendComm), data, size);
    return ncclSuccess;
  }
  ncclResult_t irecv(void* recvComm, void* data, size_t size, int, void*, void** request) override {
    *request = post(static_cast<Comm*>(recvComm), data, size);
    return ncclSuccess;
  }
  ncclResult_t test(void* request, int* done, size_t* size) override {
    auto* r = static_cast<Request*>(request);
    Comm* c = r->comm;
    *done = 0;
    // A request that completed before the peer closed is done: a finished peer closes at once.
    ncclResult_t res = progress(c);
    if (!r->complete) return res;
    *done = 1;
    if (size) *size = r->header;
    r->used = false;
    while (c->head != c->tail && !c->reqs[c->head % kMaxRequests].used) c->head++;
    return ncclSuccess;
  }
  ncclResult_t closeSend(void* comm) override {
    delete static_cast<Comm*>(comm);  // ownership came back from the host (ncclNet contract)
    return ncclSuccess;
  }
  ncclResult_t closeRecv(void* comm) override {
    delete static_cast<Comm*>(comm);
    return ncclSuccess;
  }
  ncclResult_t closeListen(void* listenComm) override {
    delete static_cast<ListenComm*>(listenComm);
    return ncclSuccess;
  }

 private:
  ncclResult_t checkDev(int dev) const {
    if (dev >= 0 && dev < static_cast<int>(ifs_.size())) return ncclSuccess;
    WARN("NET/Socket: device %d out of range (%zu devices)", dev, ifs_.size());
    return ncclInvalidArgument;
  }
  static void ready(Comm* c, bool isSend) {
    c->isSend = isSend;
    tuneForBulk(c->sock);
    failDeadLinkWithin(c->sock, static_cast<int>(param::socketTimeoutMsec()));
    setNonBlocking(c->sock.fd());
  }
  static Request* post(Comm* c, void* data, size_t size) {
    if (c->tail - c->head == kMaxRequests) return nullptr;  // full: the host retries
    Request& r = c->reqs[c->tail % kMaxRequests];
    r = Request{};
    r.comm = c;
    r.used = true;
    r.data = static_cast<char*>(data);
    r.size = size;
    r.header = size;
    c->tail++;
    return &r;
  }

  std::mutex mu_;
  std::vector<topo::NetIf> ifs_;
};

}  // namespace

std::unique_ptr<NetModule> makeSocketNetModule() { return std::make_unique<SocketNet>(); }

}  // namespace accl::net
