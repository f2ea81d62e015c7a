// ib_net.cc: the "IB" net module (see ib_net.h).
#include "transports/ib/ib_net.h"
#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>
#include "base/check.h"
#include "base/param.h"
#include "net/socket.h"
#include "topo/ifaces.h"
#include "transports/ib/ib_channel.h"
#include "transports/ib/ib_rail_return.h"
#include "transports/ib/ib_rails.h"

namespace accl::ib {
namespace {

constexpr uint64_t kHandleMagic = 0x4143434c49424e31ull;  // "ACCLIBN1"
constexpr size_t kMaxMessageBytes = size_t{1} << 31;      // sizes travel in 32-bit immediates
constexpr unsigned kIdleTestsPerPeerCheck = 128;          // a syscall only now and then

// What listen() hands to the peer (fits NCCL_NET_HANDLE_MAXSIZE).
struct Handle {
  uint64_t magic;
  uint64_t nonce;  // the connector presents it first, so strays are told apart
  uint32_t addrLen;
  unsigned char addr[sizeof(sockaddr_in6)];
};
static_assert(sizeof(Handle) <= net::kNetHandleBytes);

// The connector's first message: a QpInfo per rail (port) it offers; the acceptor answers with
// its own for the first `nrails` of them (as many as both have), then the connector sends one
// byte once its QPs are at RTS (the acceptor's receives may be written from then on). Offering
// several rails selects the striped protocol (ib_rails.h) on both sides; the connection then
// carries only the notes that take a failed port back into use (ib_rail_return.h).
struct Hello {
  uint64_t nonce;
  uint32_t nrails;
  uint32_t pad;
  unsigned char info[kIbMaxRails][sizeof(QpInfo)];
};
struct Reply {
  uint32_t nrails;
  uint32_t pad;
  unsigned char info[kIbMaxRails][sizeof(QpInfo)];
};

// A registration on every rail of the comm (each has its own protection domain).
struct IbMr {
  uint64_t handle[kIbMaxRails] = {};
  MrKeys keys[kIbMaxRails];
  uint32_t lkeys[kIbMaxRails] = {};
  uint32_t rkeys[kIbMaxRails] = {};
};

struct IbComm;
struct Request {
  IbComm* comm = nullptr;
  int64_t id = -1;
  bool inUse = false;  // posted and not yet reported done by test()
};

struct IbComm {
  // Per rail (port; one unless several are admitted): first, so destroyed last, with whatever
  // is left on the device.
  std::vector<std::unique_ptr<Verbs>> verbs;
  net::Socket oob;               // the setup connection, kept: EOF = the peer is gone; rail notes
  std::string peer;              // its setup address, for messages
  std::vector<std::unique_ptr<IbQpSet>> qps;
  std::vector<std::unique_ptr<MrCache>> mrs;
  std::unique_ptr<IbSender> sender;      // send comms, one rail
  std::unique_ptr<IbReceiver> receiver;  // receive comms, one rail
  std::unique_ptr<IbRailSet> rails;      // several rails: striped, with failover
  std::unique_ptr<IbRailSender> railSender;
  std::unique_ptr<IbRailReceiver> railReceiver;
  std::unique_ptr<IbRailReturn> railReturn;  // several rails: failed ports come back
  std::map<IbMr*, std::unique_ptr<IbMr>> mrHandles;
  Request reqs[kIbMaxInflight];
  uint64_t posted = 0;
  unsigned idle = 0;
  bool peerGone = false;
  bool errorLogged = false;
  // The setup connection closes first, so a peer that sees our QPs go away also sees EOF.
  ~IbComm() { oob.close(); }
};

struct Connecting {
  std::unique_ptr<IbComm> comm;
  std::vector<QpInfo> local;  // per rail offered
  Reply reply{};
  size_t got = 0;
};

// Per communicator (ncclNet v11 context): connects in progress, by the caller's handle.
struct Context {
  std::mutex mu;
  std::map<const void*, std::unique_ptr<Connecting>> connecting;
};

struct Accepting {
  net::Socket sock;                // until the Hello has come
  std::unique_ptr<IbComm> comm;    // from then on
  std::string peer;
  Hello hello{};
  size_t got = 0;
  char ready = 0;
  size_t readyGot = 0;
};

struct Listen {
  net::Socket sock;
  uint64_t nonce = 0;
  int dev = 0;
  std::vector<std::unique_ptr<Accepting>> pending;
};

uint64_t randomU64(const void* fallback) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) v = reinterpret_cast<uintptr_t>(fallback) * 0x9e3779b97f4a7c15ull;
  return v;
}

// Non-blocking: reads what has arrived of `want` bytes. False (with *why) on EOF or an error.
bool readSome(const net::Socket& s, void* buf, size_t want, size_t* got, std::string* why) {
  while (*got < want) {
    ssize_t n = recv(s.fd(), static_cast<char*>(buf) + *got, want - *got, MSG_DONTWAIT);
    if (n > 0) {
      *got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      *why = "closed the connection";
      return false;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    if (errno == EINTR) continue;
    *why = std::string("broke the connection (") + strerror(errno) + ")";
    return false;
  }
  return true;
}

// One in kIdleTestsPerPeerCheck idle calls looks at the setup connection: a peer whose process
// exited (or that destroyed its communicator) closed it, and no completion may ever say so.
ncclResult_t idle(IbComm* c) {
  if (c->peerGone) return ncclRemoteError;
  if (++c->idle % kIdleTestsPerPeerCheck != 0) return ncclSuccess;
  if (!net::peerClosed(c->oob)) return ncclSuccess;
  c->peerGone = true;
  // INFO: a peer that finished and left looks the same; the host warns when the data mattered.
  INFO(kSubsysNet, "NET/IB: the peer at %s closed its connection (process exited or communicator destroyed)",
       c->peer.c_str());
  return ncclRemoteError;
}

// A channel error (an error completion), logged once: WARN while the peer is still there (the
// fabric failed under a live peer), INFO when it has left (its QPs and memory went first).
ncclResult_t channelFailed(IbComm* c, ncclResult_t res) {
  const std::string& error = c->rails ? c->rails->error() : c->sender ? c->sender->error() : c->receiver->error();
  if (c->errorLogged || error.empty()) return res;
  c->errorLogged = true;
  if (net::peerClosed(c->oob))
    INFO(kSubsysNet, "NET/IB: %s (the peer had closed its connection)", error.c_str());
  else
    WARN("NET/IB: %s", error.c_str());
  return res;
}

class IbNet final : public IbNetModule {
 public:
  IbNet(std::shared_ptr<VerbsApi> verbs, const IbConfig* cfg) : verbs_(std::move(verbs)) {
    if (cfg) {
      cfg_ = *cfg;
      fixedCfg_ = true;
    }
  }
  ~IbNet() override = default;

  const char* name() const override { return "IB"; }
  std::string origin() const override { return "internal"; }
  const std::string& whyNoDevice() const override { return whyNot_; }

  ncclResult_t init() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (initDone_) return ncclSuccess;
    initDone_ = true;
    if (!fixedCfg_) cfg_ = IbConfig::fromParams();
    if (param::ibDisable() == 1) {
      whyNot_ = "disabled by NCCL_IB_DISABLE=1";
      return ncclSuccess;
    }
    std::vector<IbPort> all;
    std::string listWhy;
    NCCLCHECK(verbs_->listPorts(&all, &listWhy));
    const std::string hca = param::ibHca();
    ports_ = usablePorts(all, parseHcaSpec(hca));
    if (ports_.empty()) {
      whyNot_ = "no usable IB device (" +
                (all.empty() ? listWhy
                             : std::to_string(all.size()) + " port(s), none active" +
                                   (hca.empty() ? std::string() : " and admitted by NCCL_IB_HCA=" + hca)) +
                ")";
      return ncclSuccess;
    }
    // QpInfo is swapped over TCP on the interface the socket rules pick.
    std::vector<topo::NetIf> ifs;
    std::string ifWhy;
    if (topo::selectInterfaces(&ifs, 1, &ifWhy) != ncclSuccess || ifs.empty()) {
      whyNot_ = "no interface for the IB connection setup (" + ifWhy + ")";
      ports_.clear();
      return ncclSuccess;
    }
    oobIf_ = ifs[0];
    for (size_t i = 0; i < ports_.size(); i++)
      INFO(kSubsysInit | kSubsysNet, "NET/IB: device %zu is %s:%d (%s, %d Mbit/s); QP setup over %s (%s)", i,
           ports_[i].device.c_str(), ports_[i].port, ports_[i].ethernet ? "RoCE" : "InfiniBand",
           ports_[i].speedMbps, oobIf_.name.c_str(), oobIf_.addr.str().c_str());
    return ncclSuccess;
  }
  ncclResult_t devices(int* ndev) override {
    *ndev = static_cast<int>(ports_.size());
    return ncclSuccess;
  }
  ncclResult_t getProperties(int dev, net::NetProps* props) override {
    NCCLCHECK(checkDev(dev));
    const IbPort& p = ports_[dev];
    props->name = p.device;
    props->pciPath = p.pciPath;
    props->guid = p.guid;
    props->ptrSupport = net::kPtrHost;  // no device memory registration (yet)
    props->regIsGlobal = 0;             // registrations belong to one comm's protection domain
    props->speedMbps = p.speedMbps;
    props->port = p.port;
    props->latency = 0;
    props->maxComms = 65536;
    props->maxRecvs = 1;
    // Striped over several rails: each piece's size travels in 25 bits of its immediate.
    const size_t lanes = railPorts(dev).size() * static_cast<size_t>(cfg_.qpsPerConn);
    props->maxP2pBytes = railPorts(dev).size() > 1 ? std::min(kMaxMessageBytes, lanes * kIbMaxPieceBytes)
                                                   : kMaxMessageBytes;
    return ncclSuccess;
  }

  ncclResult_t openContext(uint64_t, void** ctx) override {
    *ctx = new Context;  // handed back to closeContext (ncclNet contract)
    return ncclSuccess;
  }
  ncclResult_t closeContext(void* ctx) override {
    delete static_cast<Context*>(ctx);
    return ncclSuccess;
  }

  ncclResult_t listen(void*, int dev, void* handle, void** listenComm) override {
    NCCLCHECK(checkDev(dev));
    auto l = std::make_unique<Listen>();
    net::SockAddr bound;
    NCCLCHECK(net::listenOn(oobIf_.addr, &l->sock, &bound));
    fcntl(l->sock.fd(), F_SETFL, fcntl(l->sock.fd(), F_GETFL) | O_NONBLOCK);  // accept() never blocks
    l->nonce = randomU64(l.get());
    l->dev = dev;
    Handle h{};
    h.magic = kHandleMagic;
    h.nonce = l->nonce;
    h.addrLen = std::min<uint32_t>(bound.len, sizeof(h.addr));
    std::memcpy(h.addr, &bound.ss, h.addrLen);
    std::memset(handle, 0, net::kNetHandleBytes);
    std::memcpy(handle, &h, sizeof(h));
    *listenComm = l.release();
    return ncclSuccess;
  }

  ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm) override {
    *sendComm = nullptr;
    NCCLCHECK(checkDev(dev));
    Context* cx = ctx ? static_cast<Context*>(ctx) : &defaultContext_;
    std::lock_guard<std::mutex> lk(cx->mu);
    auto it = cx->connecting.find(handle);
    if (it == cx->connecting.end()) {
      std::unique_ptr<Connecting> started;
      NCCLCHECK(startConnect(dev, handle, &started));
      it = cx->connecting.emplace(handle, std::move(started)).first;
    }
    Connecting& p = *it->second;
    std::string why;
    if (!readSome(p.comm->oob, &p.reply, sizeof p.reply, &p.got, &why)) {
      WARN("NET/IB: the peer at %s %s before answering the QP exchange", p.comm->peer.c_str(), why.c_str());
      cx->connecting.erase(it);
      return ncclRemoteError;
    }
    if (p.got < sizeof p.reply) return ncclSuccess;  // not yet: the caller comes back
    ncclResult_t res = ncclSuccess;
    const size_t n = p.reply.nrails;
    std::vector<QpInfo> remote(n);
    if (n < 1 || n > p.local.size()) {
      WARN("NET/IB: the peer at %s answered for %zu rails, %zu were offered", p.comm->peer.c_str(), n, p.local.size());
      res = ncclRemoteError;
    }
    for (size_t r = 0; r < n && res == ncclSuccess; r++) {
      if (!decodeQpInfo(p.reply.info[r], sizeof p.reply.info[r], &remote[r], &why)) {
        WARN("NET/IB: the peer at %s answered with a bad QP record: %s", p.comm->peer.c_str(), why.c_str());
        res = ncclRemoteError;
      }
    }
    if (res == ncclSuccess && p.comm->rails) p.comm->rails->use(static_cast<int>(n));
    for (size_t r = 0; r < n && res == ncclSuccess; r++) res = p.comm->qps[r]->connect(p.local[r], remote[r]);
    const char ready = 1;
    if (res == ncclSuccess) res = net::sendAll(p.comm->oob, &ready, 1, p.comm->peer.c_str(), nullptr, timeoutMs());
    if (res == ncclSuccess && p.comm->rails) {
      p.local.resize(n);
      p.comm->railReturn = std::make_unique<IbRailReturn>(*p.comm->rails, p.comm->oob, p.comm->railSender.get(),
                                                          nullptr, p.local, remote, cfg_.railRetrySec);
    }
    if (res == ncclSuccess) *sendComm = p.comm.release();
    cx->connecting.erase(it);
    return res;
  }

  ncclResult_t accept(void* listenComm, void** recvComm) override {
    *recvComm = nullptr;
    auto* l = static_cast<Listen*>(listenComm);
    NCCLCHECK(takeNewConnections(l));
    for (size_t i = 0; i < l->pending.size();) {
      Accepting& a = *l->pending[i];
      std::string why;
      if (!a.comm) {
        if (!readSome(a.sock, &a.hello, sizeof a.hello, &a.got, &why)) {
          WARN("NET/IB: dropped a setup connection from %s that %s before introducing itself", a.peer.c_str(),
               why.c_str());
          l->pending.erase(l->pending.begin() + static_cast<long>(i));
          continue;
        }
        if (a.got < sizeof a.hello) {
          i++;
          continue;
        }
        std::vector<QpInfo> remote(std::clamp<size_t>(a.hello.nrails, 1, kIbMaxRails));
        bool valid = a.hello.nonce == l->nonce && a.hello.nrails >= 1 && a.hello.nrails <= kIbMaxRails;
        for (size_t r = 0; r < remote.size() && valid; r++)
          valid = decodeQpInfo(a.hello.info[r], sizeof a.hello.info[r], &remote[r], &why);
        if (!valid) {
          WARN("NET/IB: dropped a setup connection from %s that did not present this listener's nonce and QP record "
               "(stray or foreign)",
               a.peer.c_str());
          l->pending.erase(l->pending.begin() + static_cast<long>(i));
          continue;
        }
        NCCLCHECK(answer(l->dev, &a, remote));
      }
      if (!readSome(a.comm->oob, &a.ready, 1, &a.readyGot, &why)) {
        WARN("NET/IB: the peer at %s %s before its QPs were ready", a.peer.c_str(), why.c_str());
        l->pending.erase(l->pending.begin() + static_cast<long>(i));
        return ncclRemoteError;
      }
      if (a.readyGot == 1) {
        *recvComm = a.comm.release();
        l->pending.erase(l->pending.begin() + static_cast<long>(i));
        return ncclSuccess;
      }
      i++;
    }
    return ncclSuccess;
  }

  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    *mhandle = nullptr;
    if (type != net::kPtrHost) {
      WARN("NET/IB: only host memory can be registered (type %d)", type);
      return ncclInvalidArgument;
    }
    auto* c = static_cast<IbComm*>(comm);
    auto mr = std::make_unique<IbMr>();
    for (size_t r = 0; r < c->mrs.size(); r++) {
      if (c->mrs[r]->reg(data, size, &mr->keys[r], &mr->handle[r]) != ncclSuccess) {
        WARN("NET/IB: registering %zu bytes at %p for the connection with %s failed", size, data, c->peer.c_str());
        for (size_t done = 0; done < r; done++) c->mrs[done]->dereg(mr->handle[done]);
        return ncclSystemError;
      }
      mr->lkeys[r] = mr->keys[r].lkey;
      mr->rkeys[r] = mr->keys[r].rkey;
    }
    *mhandle = mr.get();
    c->mrHandles[mr.get()] = std::move(mr);
    return ncclSuccess;
  }
  ncclResult_t deregMr(void* comm, void* mhandle) override {
    auto* c = static_cast<IbComm*>(comm);
    auto it = c->mrHandles.find(static_cast<IbMr*>(mhandle));
    if (it == c->mrHandles.end()) {
      WARN("NET/IB: deregMr of a handle this connection did not register");
      return ncclInvalidArgument;
    }
    ncclResult_t res = ncclSuccess;
    for (size_t r = 0; r < c->mrs.size(); r++)
      if (ncclResult_t one = c->mrs[r]->dereg(it->second->handle[r]); one != ncclSuccess) res = one;
    c->mrHandles.erase(it);
    return res;
  }

  ncclResult_t isend(void* sendComm, void* data, size_t size, int, void* mhandle, void** request) override {
    *request = nullptr;
    auto* c = static_cast<IbComm*>(sendComm);
    if (!(c->sender || c->railSender) || !mhandle) {
      WARN("NET/IB: isend needs a send comm and a registered buffer");
      return ncclInvalidArgument;
    }
    if (size > kMaxMessageBytes) {
      WARN("NET/IB: a %zu-byte message exceeds the module's %zu-byte limit", size, kMaxMessageBytes);
      return ncclInvalidArgument;
    }
    Request& r = c->reqs[c->posted % kIbMaxInflight];
    if (r.inUse) return ncclSuccess;  // kIbMaxInflight requests not yet tested: try again
    if (c->railReturn) c->railReturn->poll();
    int64_t id = -1;
    const IbMr* mr = static_cast<IbMr*>(mhandle);
    if (ncclResult_t res = c->railSender ? c->railSender->isend(data, size, mr->lkeys, &id)
                                         : c->sender->isend(data, size, mr->keys[0].lkey, &id);
        res != ncclSuccess)
      return channelFailed(c, res);
    if (id < 0) return idle(c);  // no receive posted by the peer yet
    return posted(c, r, id, request);
  }
  ncclResult_t irecv(void* recvComm, void* data, size_t size, int, void* mhandle, void** request) override {
    *request = nullptr;
    auto* c = static_cast<IbComm*>(recvComm);
    if (!(c->receiver || c->railReceiver) || !mhandle) {
      WARN("NET/IB: irecv needs a receive comm and a registered buffer");
      return ncclInvalidArgument;
    }
    Request& r = c->reqs[c->posted % kIbMaxInflight];
    if (r.inUse) return ncclSuccess;
    if (c->railReturn) c->railReturn->poll();
    int64_t id = -1;
    const IbMr* mr = static_cast<IbMr*>(mhandle);
    if (ncclResult_t res = c->railReceiver ? c->railReceiver->irecv(data, size, mr->rkeys, &id)
                                           : c->receiver->irecv(data, size, mr->keys[0].rkey, &id);
        res != ncclSuccess)
      return channelFailed(c, res);
    if (id < 0) return idle(c);
    return posted(c, r, id, request);
  }
  ncclResult_t test(void* request, int* done, size_t* size) override {
    *done = 0;
    auto* r = static_cast<Request*>(request);
    IbComm* c = r->comm;
    if (c->railReturn) c->railReturn->poll();
    bool finished = false;
    size_t bytes = 0;
    ncclResult_t res = c->railSender     ? c->railSender->test(r->id, &finished, &bytes)
                       : c->railReceiver ? c->railReceiver->test(r->id, &finished, &bytes)
                       : c->sender       ? c->sender->test(r->id, &finished, &bytes)
                                         : c->receiver->test(r->id, &finished, &bytes);
    if (res != ncclSuccess) return channelFailed(c, res);
    if (!finished) return idle(c);
    r->inUse = false;
    c->idle = 0;
    *done = 1;
    if (size) *size = bytes;
    return ncclSuccess;
  }

  ncclResult_t closeSend(void* comm) override {
    delete static_cast<IbComm*>(comm);  // ownership came back from the host (ncclNet contract)
    return ncclSuccess;
  }
  ncclResult_t closeRecv(void* comm) override {
    delete static_cast<IbComm*>(comm);
    return ncclSuccess;
  }
  ncclResult_t closeListen(void* listenComm) override {
    delete static_cast<Listen*>(listenComm);
    return ncclSuccess;
  }

 private:
  ncclResult_t checkDev(int dev) const {
    if (dev >= 0 && dev < static_cast<int>(ports_.size())) return ncclSuccess;
    WARN("NET/IB: device %d out of range (%zu devices)", dev, ports_.size());
    return ncclInvalidArgument;
  }
  static int timeoutMs() { return static_cast<int>(param::socketConnectTimeoutMsec()); }

  // The ports a comm on device `dev` stripes over: `dev` first, then the other admitted ports
  // of the same link layer, at most ACCL_IB_RAILS (and kMaxQpsPerConn QPs in all).
  std::vector<int> railPorts(int dev) const {
    std::vector<int> out{dev};
    const int most = std::clamp(std::min(cfg_.rails, kMaxQpsPerConn / std::max(cfg_.qpsPerConn, 1)), 1, kIbMaxRails);
    for (int p = 0; p < static_cast<int>(ports_.size()) && static_cast<int>(out.size()) < most; p++)
      if (p != dev && ports_[p].ethernet == ports_[dev].ethernet) out.push_back(p);
    return out;
  }
  static std::string portName(const IbPort& p) { return p.device + ":" + std::to_string(p.port); }

  // A comm on device `dev` striped over its first `nrails` rail ports, each with its verbs
  // context, QPs and registration cache; `local` receives what the peer needs, per rail.
  ncclResult_t openComm(int dev, size_t nrails, net::Socket oob, std::string peer, std::unique_ptr<IbComm>* out,
                        std::vector<QpInfo>* local) {
    auto c = std::make_unique<IbComm>();
    c->oob = std::move(oob);
    c->peer = std::move(peer);
    std::vector<int> rails = railPorts(dev);
    rails.resize(std::min(rails.size(), nrails));
    local->assign(rails.size(), QpInfo{});
    const uint32_t psn = static_cast<uint32_t>(randomU64(c.get()) & 0xffffff);
    std::vector<IbRailSet::Rail> set;
    for (size_t r = 0; r < rails.size(); r++) {
      const IbPort& port = ports_[rails[r]];
      std::string why;
      c->verbs.push_back(verbs_->open(port, &why));
      if (!c->verbs.back()) {
        WARN("NET/IB: cannot open %s: %s", portName(port).c_str(), why.c_str());
        return ncclSystemError;
      }
      c->qps.push_back(std::make_unique<IbQpSet>(*c->verbs.back(), cfg_, c->peer));
      NCCLCHECK(c->qps.back()->create(psn, &(*local)[r]));
      c->mrs.push_back(std::make_unique<MrCache>(*c->verbs.back(), c->qps.back()->pd()));
      set.push_back({c->qps.back().get(), portName(port)});
    }
    if (rails.size() > 1) {
      std::string names;
      for (const IbRailSet::Rail& r : set) names += (names.empty() ? "" : ", ") + r.name;
      INFO(kSubsysNet, "NET/IB: connection with peer %s offers %zu rails: %s", c->peer.c_str(), rails.size(),
           names.c_str());
      c->rails = std::make_unique<IbRailSet>(std::move(set), c->peer);
    }
    for (Request& r : c->reqs) r.comm = c.get();
    *out = std::move(c);
    return ncclSuccess;
  }

  // First connect() call: TCP to the listener, QPs created, Hello sent.
  ncclResult_t startConnect(int dev, const void* handle, std::unique_ptr<Connecting>* out) {
    Handle h;
    std::memcpy(&h, handle, sizeof(h));
    if (h.magic != kHandleMagic || h.addrLen > sizeof(h.addr)) {
      WARN("NET/IB: connect handle is not an IB handle (magic %llx)", static_cast<unsigned long long>(h.magic));
      return ncclInvalidArgument;
    }
    net::SockAddr addr;
    std::memcpy(&addr.ss, h.addr, h.addrLen);
    addr.len = h.addrLen;
    net::Socket sock;
    std::string why;
    if (net::connectWithin(addr, &sock, timeoutMs(), &why) != ncclSuccess) {
      WARN("NET/IB: cannot reach the peer's QP setup listener at %s: %s", addr.str().c_str(), why.c_str());
      return ncclRemoteError;
    }
    auto p = std::make_unique<Connecting>();
    NCCLCHECK(openComm(dev, kIbMaxRails, std::move(sock), addr.str(), &p->comm, &p->local));
    IbComm& c = *p->comm;
    if (c.rails) {
      c.railSender = std::make_unique<IbRailSender>(*c.rails);
      NCCLCHECK(c.railSender->init(&p->local));
    } else {
      c.sender = std::make_unique<IbSender>(*c.qps[0]);
      NCCLCHECK(c.sender->init(&p->local[0]));
    }
    Hello hello{};
    hello.nonce = h.nonce;
    hello.nrails = static_cast<uint32_t>(p->local.size());
    for (size_t r = 0; r < p->local.size(); r++) encodeQpInfo(p->local[r], hello.info[r], sizeof hello.info[r]);
    NCCLCHECK(net::sendAll(c.oob, &hello, sizeof hello, c.peer.c_str(), nullptr, timeoutMs()));
    *out = std::move(p);
    return ncclSuccess;
  }

  ncclResult_t takeNewConnections(Listen* l) {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      net::Socket s(accept4(l->sock.fd(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!s.valid()) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return ncclSuccess;
        WARN("NET/IB: accept on the QP setup listener failed: %s", strerror(errno));
        return ncclSystemError;
      }
      auto a = std::make_unique<Accepting>();
      net::SockAddr from;
      from.ss = ss;
      from.len = len;
      a->peer = from.str();
      a->sock = std::move(s);
      l->pending.push_back(std::move(a));
    }
  }

  // The Hello came: QPs to RTS against the connector's, receiver pointed at its credit FIFO,
  // our record sent back.
  // Offered several rails, the striped protocol is used even if this side has one port.
  ncclResult_t answer(int dev, Accepting* a, const std::vector<QpInfo>& remote) {
    std::vector<QpInfo> local;
    NCCLCHECK(openComm(dev, remote.size(), std::move(a->sock), a->peer, &a->comm, &local));
    IbComm& c = *a->comm;
    for (size_t r = 0; r < local.size(); r++) NCCLCHECK(c.qps[r]->connect(local[r], remote[r]));
    if (remote.size() > 1) {
      if (!c.rails) c.rails = std::make_unique<IbRailSet>(
                        std::vector<IbRailSet::Rail>{{c.qps[0].get(), portName(ports_[dev])}}, c.peer);
      c.railReceiver = std::make_unique<IbRailReceiver>(*c.rails);
      NCCLCHECK(c.railReceiver->init(remote));
      c.railReturn = std::make_unique<IbRailReturn>(*c.rails, c.oob, nullptr, c.railReceiver.get(), local, remote,
                                                    cfg_.railRetrySec);
    } else {
      c.receiver = std::make_unique<IbReceiver>(*c.qps[0]);
      NCCLCHECK(c.receiver->init(remote[0]));
    }
    Reply reply{};
    reply.nrails = static_cast<uint32_t>(local.size());
    for (size_t r = 0; r < local.size(); r++) encodeQpInfo(local[r], reply.info[r], sizeof reply.info[r]);
    return net::sendAll(c.oob, &reply, sizeof reply, c.peer.c_str(), nullptr, timeoutMs());
  }

  static ncclResult_t posted(IbComm* c, Request& r, int64_t id, void** request) {
    r.id = id;
    r.inUse = true;
    c->posted++;
    c->idle = 0;
    *request = &r;
    return ncclSuccess;
  }

  std::shared_ptr<VerbsApi> verbs_;
  IbConfig cfg_;
  bool fixedCfg_ = false;
  std::mutex mu_;
  bool initDone_ = false;
  std::string whyNot_;
  std::vector<IbPort> ports_;
  topo::NetIf oobIf_;
  Context defaultContext_;  // for callers that open no context
};

std::mutex gProcessMu;
std::shared_ptr<VerbsApi>& testVerbs() {
  static std::shared_ptr<VerbsApi> v;
  return v;
}

}  // namespace

std::unique_ptr<IbNetModule> makeIbNetModule(std::shared_ptr<VerbsApi> verbs, const IbConfig* cfg) {
  return std::make_unique<IbNet>(std::move(verbs), cfg);
}

IbNetModule* processIbNetModule() {
  // Kept for the life of the process, like the external plugins: progress threads of
  // communicators that are never destroyed may call it until exit.
  static IbNetModule* module = [] {
    std::lock_guard<std::mutex> lk(gProcessMu);
    std::shared_ptr<VerbsApi> verbs = testVerbs();
    if (!verbs) verbs = systemVerbs();
    return makeIbNetModule(std::move(verbs)).release();
  }();
  return module;
}

void setIbVerbsForTesting(std::shared_ptr<VerbsApi> verbs) {
  std::lock_guard<std::mutex> lk(gProcessMu);
  testVerbs() = std::move(verbs);
}

}  // namespace accl::ib
