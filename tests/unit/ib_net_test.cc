// The IB net module end to end on the in-process fake fabric (tests/unit/ib_fake_verbs.h):
// two "nodes" (fake hosts, each with its own module) listen, connect and accept through the
// real TCP QP exchange, then move messages both ways; a peer whose QPs fail, a peer that
// closed its connections and a peer that dies during setup each end in an error, not a hang.
#include <algorithm>
#include <gtest/gtest.h>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <regex>
#include <string>
#include <tuple>
#include <vector>
#include "base/log.h"
#include "transports/ib/ib_channel.h"
#include "transports/ib/ib_net.h"
#include "transports/ib/ib_rails.h"
#include "unit/ib_fake_verbs.h"

using namespace accl;
using namespace accl::ib;

namespace {

using Clock = std::chrono::steady_clock;

Gid roceV2Gid(uint8_t host) {
  Gid g{};
  g[10] = g[11] = 0xff;
  g[12] = 10; g[13] = 77; g[15] = host;
  return g;
}

IbPort port(const char* device, bool active, int speed = 100000) {
  IbPort p;
  p.device = device;
  p.port = 1;
  p.active = active;
  p.ethernet = true;
  p.speedMbps = speed;
  p.guid = 0x0c42a10300b1c2d3ull;
  p.pciPath = std::string("/sys/devices/pci0000:00/0000:00:02.0/") + device;
  return p;
}

std::shared_ptr<fake::Host> fakeHost(fake::Fabric& f, int id, std::vector<IbPort> ports) {
  return std::make_shared<fake::Host>(f, id, std::move(ports), PortInfo{0, true, 4096},
                                      std::vector<GidEntry>{{0, Gid{}, GidType::IbOrRoceV1},
                                                            {1, roceV2Gid(static_cast<uint8_t>(id)), GidType::RoceV2}});
}

// Node A (host 1) and node B (host 2), each with its own module over the shared fabric.
// With several devices each connection stripes over all of them (ib_rails.h).
struct TwoNodes {
  fake::Fabric fabric;
  std::shared_ptr<fake::Host> hostA, hostB;
  IbConfig cfg;
  std::unique_ptr<IbNetModule> a, b;
  void* ctxA = nullptr;
  void* ctxB = nullptr;
  void* aSend = nullptr;
  void* aRecv = nullptr;
  void* bSend = nullptr;
  void* bRecv = nullptr;

  // Each node has the active ports `devices` (port 1 of each); a failed port is asked again
  // every `railRetrySec` (ACCL_RAIL_RETRY_SEC).
  explicit TwoNodes(int nqps, std::vector<const char*> devices = {"mlx5_0"}, int railRetrySec = 10) {
    std::vector<IbPort> ports;
    for (const char* d : devices) ports.push_back(port(d, true));
    hostA = fakeHost(fabric, 1, ports);
    hostB = fakeHost(fabric, 2, ports);
    cfg.qpsPerConn = nqps;
    cfg.railRetrySec = railRetrySec;
    a = makeIbNetModule(hostA, &cfg);
    b = makeIbNetModule(hostB, &cfg);
    EXPECT_EQ(a->init(), ncclSuccess);
    EXPECT_EQ(b->init(), ncclSuccess);
    EXPECT_EQ(a->openContext(1, &ctxA), ncclSuccess);
    EXPECT_EQ(b->openContext(1, &ctxB), ncclSuccess);
  }
  ~TwoNodes() {
    closeA();
    closeB();
    if (ctxA) a->closeContext(ctxA);
    if (ctxB) b->closeContext(ctxB);
  }
  void closeA() {
    if (aSend) a->closeSend(aSend);
    if (aRecv) a->closeRecv(aRecv);
    aSend = aRecv = nullptr;
  }
  void closeB() {
    if (bSend) b->closeSend(bSend);
    if (bRecv) b->closeRecv(bRecv);
    bSend = bRecv = nullptr;
  }
  // A -> B and B -> A, through listen handles, non-blocking connect/accept as ncclNet calls them.
  void connectBoth() {
    char hA[net::kNetHandleBytes], hB[net::kNetHandleBytes];
    void *lA = nullptr, *lB = nullptr;
    ASSERT_EQ(a->listen(ctxA, 0, hA, &lA), ncclSuccess);
    ASSERT_EQ(b->listen(ctxB, 0, hB, &lB), ncclSuccess);
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!(aSend && aRecv && bSend && bRecv) && Clock::now() < deadline) {
      if (!aSend) {
        ASSERT_EQ(a->connect(ctxA, 0, hB, &aSend), ncclSuccess);
      }
      if (!bSend) {
        ASSERT_EQ(b->connect(ctxB, 0, hA, &bSend), ncclSuccess);
      }
      if (!aRecv) {
        ASSERT_EQ(a->accept(lA, &aRecv), ncclSuccess);
      }
      if (!bRecv) {
        ASSERT_EQ(b->accept(lB, &bRecv), ncclSuccess);
      }
    }
    a->closeListen(lA);
    b->closeListen(lB);
    ASSERT_TRUE(aSend && aRecv && bSend && bRecv) << "connect/accept did not finish";
  }
};

// Tests `req` until done, an error, or a deadline; returns the last result.
ncclResult_t waitFor(IbNetModule* m, void* req, size_t* size, int seconds = 5) {
  auto deadline = Clock::now() + std::chrono::seconds(seconds);
  int done = 0;
  while (Clock::now() < deadline) {
    ncclResult_t res = m->test(req, &done, size);
    if (res != ncclSuccess || done) return res;
  }
  return ncclInProgress;
}

// Sends `n` messages of varying sizes from (ms, sendComm) to (mr, recvComm), checking each.
void exchange(IbNetModule* ms, void* sendComm, IbNetModule* mr, void* recvComm, int n, int salt) {
  std::vector<unsigned char> src(70000), dst(70000);
  void *hs = nullptr, *hd = nullptr;
  ASSERT_EQ(ms->regMr(sendComm, src.data(), src.size(), net::kPtrHost, &hs), ncclSuccess);
  ASSERT_EQ(mr->regMr(recvComm, dst.data(), dst.size(), net::kPtrHost, &hd), ncclSuccess);
  for (int m = 0; m < n; m++) {
    size_t size = 1 + static_cast<size_t>(m * 7919 + salt * 31) % src.size();
    for (size_t i = 0; i < size; i++) src[i] = static_cast<unsigned char>(i * 13 + m + salt);
    void *rreq = nullptr, *sreq = nullptr;
    ASSERT_EQ(mr->irecv(recvComm, dst.data(), dst.size(), 0, hd, &rreq), ncclSuccess);
    ASSERT_NE(rreq, nullptr);
    auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!sreq && Clock::now() < deadline) ASSERT_EQ(ms->isend(sendComm, src.data(), size, 0, hs, &sreq), ncclSuccess);
    ASSERT_NE(sreq, nullptr) << "no credit for message " << m;
    size_t sent = 0, got = 0;
    ASSERT_EQ(waitFor(ms, sreq, &sent), ncclSuccess);
    ASSERT_EQ(waitFor(mr, rreq, &got), ncclSuccess);
    ASSERT_EQ(got, size) << "message " << m;
    ASSERT_EQ(sent, size);
    ASSERT_EQ(std::memcmp(src.data(), dst.data(), size), 0) << "message " << m;
  }
  EXPECT_EQ(ms->deregMr(sendComm, hs), ncclSuccess);
  EXPECT_EQ(mr->deregMr(recvComm, hd), ncclSuccess);
}

TEST(IbNet, PropertiesDescribeTheActivePortForHostMemoryOnly) {
  fake::Fabric fabric;
  auto host = fakeHost(fabric, 1, {port("mlx5_0", false), port("mlx5_1", true, 200000)});
  auto m = makeIbNetModule(host);
  ASSERT_EQ(m->init(), ncclSuccess);
  EXPECT_EQ(m->whyNoDevice(), "");
  int ndev = 0;
  ASSERT_EQ(m->devices(&ndev), ncclSuccess);
  ASSERT_EQ(ndev, 1);  // the inactive port is not a device
  net::NetProps props;
  ASSERT_EQ(m->getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.name, "mlx5_1");
  EXPECT_EQ(props.port, 1);
  EXPECT_EQ(props.speedMbps, 200000);
  EXPECT_EQ(props.guid, 0x0c42a10300b1c2d3ull);
  EXPECT_EQ(props.pciPath, "/sys/devices/pci0000:00/0000:00:02.0/mlx5_1");
  EXPECT_EQ(props.ptrSupport, net::kPtrHost);  // no device pointers: no CUDA flag
  EXPECT_EQ(props.regIsGlobal, 0);
  EXPECT_GT(props.maxComms, 0);
  EXPECT_EQ(m->getProperties(1, &props), ncclInvalidArgument);
  EXPECT_STREQ(m->name(), "IB");
}

TEST(IbNet, WithoutAnAdmittedActivePortThereIsNoDeviceAndTheReasonSaysWhy) {
  fake::Fabric fabric;
  auto down = makeIbNetModule(fakeHost(fabric, 1, {port("mlx5_0", false)}));
  ASSERT_EQ(down->init(), ncclSuccess);
  int ndev = -1;
  ASSERT_EQ(down->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 0);
  EXPECT_EQ(down->whyNoDevice(), "no usable IB device (1 port(s), none active)");

  auto none = makeIbNetModule(fakeHost(fabric, 2, {}));
  ASSERT_EQ(none->init(), ncclSuccess);
  EXPECT_EQ(none->whyNoDevice(), "no usable IB device (no RDMA device (fake host without ports))");

  setenv("NCCL_IB_HCA", "^mlx5", 1);
  auto excluded = makeIbNetModule(fakeHost(fabric, 3, {port("mlx5_0", true)}));
  ncclResult_t res = excluded->init();
  unsetenv("NCCL_IB_HCA");
  ASSERT_EQ(res, ncclSuccess);
  EXPECT_EQ(excluded->whyNoDevice(), "no usable IB device (1 port(s), none active and admitted by NCCL_IB_HCA=^mlx5)");
}

TEST(IbNet, ConnectAcceptThenMessagesFlowBothWaysOverOneQp) {
  TwoNodes t(1);
  ASSERT_NO_FATAL_FAILURE(t.connectBoth());
  EXPECT_EQ(t.hostA->opened.load(), 2);  // one verbs context per comm
  EXPECT_EQ(t.hostB->opened.load(), 2);
  // Every QP of both nodes reached RTS, paired with a QP of the other node.
  for (const auto& [qpn, qp] : t.fabric.qps) {
    EXPECT_EQ(qp.transitions.size(), 3u) << "QP " << qpn;
    ASSERT_TRUE(t.fabric.qps.count(qp.remote)) << "QP " << qpn;
    EXPECT_NE(t.fabric.qps.at(qp.remote).host, qp.host);
    EXPECT_EQ(t.fabric.qps.at(qp.remote).remote, qpn);
  }
  EXPECT_EQ(t.fabric.qps.size(), 4u);
  exchange(t.a.get(), t.aSend, t.b.get(), t.bRecv, 30, 1);
  exchange(t.b.get(), t.bSend, t.a.get(), t.aRecv, 30, 2);
  EXPECT_EQ(t.fabric.rnrErrors, 0);
}

TEST(IbNet, MessagesSplitAcrossThreeQpsArriveWhole) {
  TwoNodes t(3);
  ASSERT_NO_FATAL_FAILURE(t.connectBoth());
  EXPECT_EQ(t.fabric.qpsOf(1), 6u);  // 3 per comm, 2 comms per node
  exchange(t.a.get(), t.aSend, t.b.get(), t.bRecv, 20, 3);
  exchange(t.b.get(), t.bSend, t.a.get(), t.aRecv, 20, 4);
}

TEST(IbNet, EightSendsInFlightThenTheNinthWaitsForATest) {
  TwoNodes t(1);
  ASSERT_NO_FATAL_FAILURE(t.connectBoth());
  std::vector<char> src(4096), dst(4096 * kIbMaxInflight);
  void *hs, *hd;
  ASSERT_EQ(t.a->regMr(t.aSend, src.data(), src.size(), net::kPtrHost, &hs), ncclSuccess);
  ASSERT_EQ(t.b->regMr(t.bRecv, dst.data(), dst.size(), net::kPtrHost, &hd), ncclSuccess);
  std::vector<void*> rreqs, sreqs;
  for (int i = 0; i < kIbMaxInflight; i++) {
    void* r = nullptr;
    ASSERT_EQ(t.b->irecv(t.bRecv, dst.data() + 4096 * i, 4096, 0, hd, &r), ncclSuccess);
    ASSERT_NE(r, nullptr);
    rreqs.push_back(r);
  }
  void* extra = nullptr;
  ASSERT_EQ(t.b->irecv(t.bRecv, dst.data(), 4096, 0, hd, &extra), ncclSuccess);
  EXPECT_EQ(extra, nullptr) << "a ninth receive before any was tested";
  for (int i = 0; i < kIbMaxInflight; i++) {
    void* s = nullptr;
    ASSERT_EQ(t.a->isend(t.aSend, src.data(), 100 + i, 0, hs, &s), ncclSuccess);
    ASSERT_NE(s, nullptr);
    sreqs.push_back(s);
  }
  void* ninth = nullptr;
  ASSERT_EQ(t.a->isend(t.aSend, src.data(), 1, 0, hs, &ninth), ncclSuccess);
  EXPECT_EQ(ninth, nullptr) << "a ninth send without a credit";
  for (int i = 0; i < kIbMaxInflight; i++) {
    size_t got = 0, sent = 0;
    ASSERT_EQ(waitFor(t.a.get(), sreqs[i], &sent), ncclSuccess);
    ASSERT_EQ(waitFor(t.b.get(), rreqs[i], &got), ncclSuccess);
    EXPECT_EQ(got, static_cast<size_t>(100 + i));
  }
  t.a->deregMr(t.aSend, hs);
  t.b->deregMr(t.bRecv, hd);
}

TEST(IbNet, DeviceMemoryCannotBeRegistered) {
  TwoNodes t(1);
  ASSERT_NO_FATAL_FAILURE(t.connectBoth());
  char buf[64];
  void* h = reinterpret_cast<void*>(1);
  EXPECT_EQ(t.a->regMr(t.aSend, buf, sizeof buf, net::kPtrCuda, &h), ncclInvalidArgument);
  EXPECT_EQ(h, nullptr);
}

// The peer's process died: its QPs error, so writes towards it complete with an error.
TEST(IbNet, APeerWhoseQpsFailedGivesACompletionErrorNotAHang) {
  TwoNodes t(2);
  ASSERT_NO_FATAL_FAILURE(t.connectBoth());
  std::vector<char> src(1024), dst(1024);
  void *hs, *hd, *hr;
  ASSERT_EQ(t.a->regMr(t.aSend, src.data(), src.size(), net::kPtrHost, &hs), ncclSuccess);
  ASSERT_EQ(t.b->regMr(t.bRecv, dst.data(), dst.size(), net::kPtrHost, &hd), ncclSuccess);
  ASSERT_EQ(t.a->regMr(t.aRecv, dst.data(), dst.size(), net::kPtrHost, &hr), ncclSuccess);
  void* rreq = nullptr;
  ASSERT_EQ(t.b->irecv(t.bRecv, dst.data(), dst.size(), 0, hd, &rreq), ncclSuccess);  // B's credit is at A
  t.fabric.breakHost(2);
  void* sreq = nullptr;
  ASSERT_EQ(t.a->isend(t.aSend, src.data(), src.size(), 0, hs, &sreq), ncclSuccess);
  ASSERT_NE(sreq, nullptr);
  size_t size = 0;
  EXPECT_EQ(waitFor(t.a.get(), sreq, &size), ncclRemoteError);
  // A's receive side: its credit write towards B fails too.
  void* areq = nullptr;
  ASSERT_EQ(t.a->irecv(t.aRecv, dst.data(), dst.size(), 0, hr, &areq), ncclSuccess);
  ASSERT_NE(areq, nullptr);
  EXPECT_EQ(waitFor(t.a.get(), areq, &size), ncclRemoteError);
}

// The peer closed its comms (process exited, or destroyed its communicator): no credit will
// ever come and no completion reports it; the setup connection's EOF does.
TEST(IbNet, APeerThatClosedItsConnectionsIsAnErrorNotAHang) {
  TwoNodes t(1);
  ASSERT_NO_FATAL_FAILURE(t.connectBoth());
  std::vector<char> buf(1024);
  void *hs, *hr;
  ASSERT_EQ(t.a->regMr(t.aSend, buf.data(), buf.size(), net::kPtrHost, &hs), ncclSuccess);
  ASSERT_EQ(t.a->regMr(t.aRecv, buf.data(), buf.size(), net::kPtrHost, &hr), ncclSuccess);
  void* rreq = nullptr;
  ASSERT_EQ(t.a->irecv(t.aRecv, buf.data(), buf.size(), 0, hr, &rreq), ncclSuccess);
  ASSERT_NE(rreq, nullptr);
  t.closeB();
  size_t size = 0;
  EXPECT_EQ(waitFor(t.a.get(), rreq, &size), ncclRemoteError);
  ncclResult_t res = ncclSuccess;
  void* sreq = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (res == ncclSuccess && !sreq && Clock::now() < deadline)
    res = t.a->isend(t.aSend, buf.data(), 10, 0, hs, &sreq);
  EXPECT_EQ(sreq, nullptr);
  EXPECT_EQ(res, ncclRemoteError) << "isend kept waiting for a credit from a peer that is gone";
}

// The connector gave up after its first step: the acceptor, waiting for "ready", fails.
TEST(IbNet, AConnectorThatDiesDuringSetupFailsTheAccept) {
  TwoNodes t(1);
  char h[net::kNetHandleBytes];
  void* l = nullptr;
  ASSERT_EQ(t.a->listen(t.ctxA, 0, h, &l), ncclSuccess);
  void* send = nullptr;
  ASSERT_EQ(t.b->connect(t.ctxB, 0, h, &send), ncclSuccess);
  ASSERT_EQ(send, nullptr);  // still waiting for A's answer
  t.b->closeContext(t.ctxB);  // drops the connect in progress: its socket closes
  t.ctxB = nullptr;
  ncclResult_t res = ncclSuccess;
  void* recv = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (res == ncclSuccess && !recv && Clock::now() < deadline) res = t.a->accept(l, &recv);
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_EQ(recv, nullptr);
  t.a->closeListen(l);
}

// The listener went away before answering: the connector fails instead of waiting forever.
TEST(IbNet, AListenerThatClosesDuringSetupFailsTheConnect) {
  TwoNodes t(1);
  char h[net::kNetHandleBytes];
  void* l = nullptr;
  ASSERT_EQ(t.a->listen(t.ctxA, 0, h, &l), ncclSuccess);
  void* send = nullptr;
  ASSERT_EQ(t.b->connect(t.ctxB, 0, h, &send), ncclSuccess);
  ASSERT_EQ(send, nullptr);
  t.a->closeListen(l);
  ncclResult_t res = ncclSuccess;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (res == ncclSuccess && !send && Clock::now() < deadline) res = t.b->connect(t.ctxB, 0, h, &send);
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_EQ(send, nullptr);
}

TEST(IbNet, AHandleFromAnotherModuleIsRefused) {
  TwoNodes t(1);
  char h[net::kNetHandleBytes] = {};
  std::memcpy(h, "not an IB handle", 16);
  void* send = nullptr;
  EXPECT_EQ(t.a->connect(t.ctxA, 0, h, &send), ncclInvalidArgument);
  EXPECT_EQ(send, nullptr);
}

// ---- Several ports (rails): striping and failover (transports/ib/ib_rails.h) ----------------

// WARN lines logged while it lives.
class WarnCapture {
 public:
  WarnCapture() {
    std::lock_guard<std::mutex> lk(mu());
    lines().clear();
    setLogSink(&sink);
  }
  ~WarnCapture() { setLogSink(nullptr); }
  // The WARN lines that match `pattern` (ECMAScript regex).
  std::vector<std::string> matching(const std::string& pattern) {
    std::lock_guard<std::mutex> lk(mu());
    std::vector<std::string> out;
    for (const std::string& l : lines())
      if (std::regex_search(l, std::regex(pattern))) out.push_back(l);
    return out;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::string>& lines() {
    static std::vector<std::string> l;
    return l;
  }
  static void sink(LogLevel level, uint64_t, const char*, int, const char* text) {
    if (level != LogLevel::Warn) return;
    std::lock_guard<std::mutex> lk(mu());
    lines().push_back(text);
  }
};

uint64_t portBytes(fake::Fabric& f, int host, const char* port) {
  std::lock_guard<std::recursive_mutex> lk(f.mu);
  return f.bytesByPort[{host, port}];
}

// Batches of kIbMaxInflight messages in flight at once from (ms, sendComm) to (mr, recvComm),
// each checked for size and content against what was sent; `beforeBatch(b)` runs first.
void exchangeInFlight(IbNetModule* ms, void* sendComm, IbNetModule* mr, void* recvComm, int batches, int salt,
                      const std::function<void(int)>& beforeBatch = {}) {
  constexpr size_t kMax = 200000;
  std::vector<unsigned char> src(kMax * kIbMaxInflight), dst(kMax * kIbMaxInflight);
  void *hs = nullptr, *hd = nullptr;
  ASSERT_EQ(ms->regMr(sendComm, src.data(), src.size(), net::kPtrHost, &hs), ncclSuccess);
  ASSERT_EQ(mr->regMr(recvComm, dst.data(), dst.size(), net::kPtrHost, &hd), ncclSuccess);
  for (int b = 0; b < batches; b++) {
    if (beforeBatch) beforeBatch(b);
    size_t sizes[kIbMaxInflight];
    void *rreq[kIbMaxInflight] = {}, *sreq[kIbMaxInflight] = {};
    std::fill(dst.begin(), dst.end(), 0xee);
    for (int m = 0; m < kIbMaxInflight; m++) {
      sizes[m] = 1 + static_cast<size_t>((b * kIbMaxInflight + m) * 7919 + salt * 31) % kMax;
      for (size_t i = 0; i < sizes[m]; i++) src[m * kMax + i] = static_cast<unsigned char>(i * 13 + m + b + salt);
      ASSERT_EQ(mr->irecv(recvComm, dst.data() + m * kMax, kMax, 0, hd, &rreq[m]), ncclSuccess);
      ASSERT_NE(rreq[m], nullptr);
    }
    for (int m = 0; m < kIbMaxInflight; m++) {
      auto deadline = Clock::now() + std::chrono::seconds(5);
      while (!sreq[m] && Clock::now() < deadline)
        ASSERT_EQ(ms->isend(sendComm, src.data() + m * kMax, sizes[m], 0, hs, &sreq[m]), ncclSuccess);
      ASSERT_NE(sreq[m], nullptr) << "no credit for message " << m << " of batch " << b;
    }
    for (int m = 0; m < kIbMaxInflight; m++) {
      size_t sent = 0, got = 0;
      ASSERT_EQ(waitFor(ms, sreq[m], &sent), ncclSuccess) << "message " << m << " of batch " << b;
      ASSERT_EQ(waitFor(mr, rreq[m], &got), ncclSuccess) << "message " << m << " of batch " << b;
      ASSERT_EQ(sent, sizes[m]);
      ASSERT_EQ(got, sizes[m]) << "message " << m << " of batch " << b;
      ASSERT_EQ(std::memcmp(src.data() + m * kMax, dst.data() + m * kMax, sizes[m]), 0)
          << "message " << m << " of batch " << b;
      ASSERT_EQ(dst[m * kMax + sizes[m]], 0xee) << "written past message " << m << " of batch " << b;
    }
  }
  EXPECT_EQ(ms->deregMr(sendComm, hs), ncclSuccess);
  EXPECT_EQ(mr->deregMr(recvComm, hd), ncclSuccess);
}

TEST(IbNetRails, TwoPortsEachCarryHalfOfEveryMessage) {
  TwoNodes t(1, {"mlx5_0", "mlx5_1"});
  ASSERT_NO_FATAL_FAILURE(t.connectBoth());
  EXPECT_EQ(t.hostA->opened.load(), 4);  // a verbs context per port, per comm
  EXPECT_EQ(t.fabric.qpsOf(1), 4u);
  for (const auto& [qpn, qp] : t.fabric.qps) {
    EXPECT_EQ(t.fabric.qps.at(qp.remote).port, qp.port) << "QP " << qpn << " is paired across ports";
    EXPECT_EQ(qp.transitions.size(), 3u) << "QP " << qpn;
  }
  net::NetProps props;
  ASSERT_EQ(t.a->getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.maxP2pBytes, 2 * static_cast<size_t>(kIbMaxPieceBytes));
  exchange(t.a.get(), t.aSend, t.b.get(), t.bRecv, 30, 5);
  exchange(t.b.get(), t.bSend, t.a.get(), t.aRecv, 30, 6);
  ASSERT_NO_FATAL_FAILURE(exchangeInFlight(t.a.get(), t.aSend, t.b.get(), t.bRecv, 3, 7));
  for (int host : {1, 2}) {
    const double p0 = static_cast<double>(portBytes(t.fabric, host, "mlx5_0:1"));
    const double p1 = static_cast<double>(portBytes(t.fabric, host, "mlx5_1:1"));
    EXPECT_GT(p0, 1e5) << "host " << host;
    EXPECT_NEAR(p0 / (p0 + p1), 0.5, 0.001) << "host " << host << ": " << p0 << " / " << p1 << " bytes";
  }
  EXPECT_EQ(t.fabric.rnrErrors, 0);
}

struct BrokenPort {
  int host;          // 1: the sending node's port; 2: the receiving node's
  const char* port;  // mlx5_0:1 also carries the receiver's credits
};
class IbNetRailFailover : public ::testing::TestWithParam<BrokenPort> {};

// Mid-batch (messages in flight, a piece landed and the next not yet written) every QP of one
// port of one node goes to the error state: the pieces and credits that were on it are written
// again on the other port, every message arrives whole and exact, both nodes WARN naming the
// port and the peer, and the failed port carries nothing afterwards.
TEST_P(IbNetRailFailover, AQpInTheErrorStateMovesItsWorkToTheOtherPortAndEveryMessageArrivesExact) {
  const BrokenPort broken = GetParam();
  const std::string other = std::string(broken.port) == "mlx5_0:1" ? "mlx5_1:1" : "mlx5_0:1";
  TwoNodes t(1, {"mlx5_0", "mlx5_1"});
  ASSERT_NO_FATAL_FAILURE(t.connectBoth());
  WarnCapture warns;
  int deliveries = 0;
  std::function<void()> countdown = [&] {
    if (++deliveries == 11) t.fabric.breakPort(broken.host, broken.port);  // under the fabric's lock
    else t.fabric.onDelivery = countdown;
  };
  ASSERT_NO_FATAL_FAILURE(exchangeInFlight(t.a.get(), t.aSend, t.b.get(), t.bRecv, 4, 8, [&](int batch) {
    if (batch == 1) {
      std::lock_guard<std::recursive_mutex> lk(t.fabric.mu);
      t.fabric.onDelivery = countdown;
    }
  }));
  ASSERT_EQ(deliveries, 11) << "the port was never broken";
  const std::string moved = "QP [0-9]+ on " + std::string(broken.port) +
                            " to peer [0-9.]+:[0-9]+ went to the error state \\(.+\\); its work continues on " + other;
  EXPECT_FALSE(warns.matching("^NET/IB: " + moved).empty())
      << "no WARN names the port, the peer and where the work went";
  // The failed port carries nothing more, in either direction; the other one everything.
  const uint64_t deadA = portBytes(t.fabric, 1, broken.port), deadB = portBytes(t.fabric, 2, broken.port);
  const uint64_t liveA = portBytes(t.fabric, 1, other.c_str());
  ASSERT_NO_FATAL_FAILURE(exchangeInFlight(t.a.get(), t.aSend, t.b.get(), t.bRecv, 2, 9));
  EXPECT_EQ(portBytes(t.fabric, 1, broken.port), deadA);
  EXPECT_EQ(portBytes(t.fabric, 2, broken.port), deadB);
  EXPECT_GT(portBytes(t.fabric, 1, other.c_str()), liveA + 8 * 100000);
  // The other direction, whose comms lost the same port, goes on too.
  ASSERT_NO_FATAL_FAILURE(exchangeInFlight(t.b.get(), t.bSend, t.a.get(), t.aRecv, 2, 10));
}

INSTANTIATE_TEST_SUITE_P(SenderOrReceiverPort, IbNetRailFailover,
                         ::testing::Values(BrokenPort{1, "mlx5_1:1"}, BrokenPort{2, "mlx5_1:1"},
                                           BrokenPort{1, "mlx5_0:1"}, BrokenPort{2, "mlx5_0:1"}),
                         [](const ::testing::TestParamInfo<BrokenPort>& info) {
                           return std::string(info.param.host == 1 ? "Sender" : "Receiver") +
                                  (std::string(info.param.port) == "mlx5_0:1" ? "FirstPort" : "SecondPort");
                         });

// With every port gone there is nowhere to move the work: the comm fails (never hangs), and
// the error names the peer and every port.
TEST(IbNetRails, WhenEveryPortFailsTheConnectionFailsNamingThePeerAndThePorts) {
  TwoNodes t(1, {"mlx5_0", "mlx5_1"});
  ASSERT_NO_FATAL_FAILURE(t.connectBoth());
  ASSERT_NO_FATAL_FAILURE(exchangeInFlight(t.a.get(), t.aSend, t.b.get(), t.bRecv, 1, 11));
  WarnCapture warns;
  std::vector<char> src(1024), dst(1024);
  void *hs, *hd;
  ASSERT_EQ(t.a->regMr(t.aSend, src.data(), src.size(), net::kPtrHost, &hs), ncclSuccess);
  ASSERT_EQ(t.b->regMr(t.bRecv, dst.data(), dst.size(), net::kPtrHost, &hd), ncclSuccess);
  void* rreq = nullptr;
  ASSERT_EQ(t.b->irecv(t.bRecv, dst.data(), dst.size(), 0, hd, &rreq), ncclSuccess);
  t.fabric.breakPort(2, "mlx5_0:1");
  t.fabric.breakPort(2, "mlx5_1:1");
  void* sreq = nullptr;
  ASSERT_EQ(t.a->isend(t.aSend, src.data(), src.size(), 0, hs, &sreq), ncclSuccess);
  ASSERT_NE(sreq, nullptr);
  size_t size = 0;
  EXPECT_EQ(waitFor(t.a.get(), sreq, &size), ncclRemoteError);
  const std::string everyPort =
      "^NET/IB: IB completion error with peer [0-9.]+:[0-9]+ on every port: mlx5_[01]:1 \\(.+\\), mlx5_[01]:1 \\(.+\\)$";
  EXPECT_FALSE(warns.matching(everyPort).empty()) << "the failure does not name the peer and both ports";
  EXPECT_EQ(waitFor(t.b.get(), rreq, &size), ncclRemoteError);
}

// Batches of messages A -> B, each checked, until `done()` or `limit` has passed.
void trafficUntil(TwoNodes& t, Clock::duration limit, const std::function<bool()>& done, int salt) {
  const auto end = Clock::now() + limit;
  for (int i = 0; !done() && Clock::now() < end; i++)
    ASSERT_NO_FATAL_FAILURE(exchangeInFlight(t.a.get(), t.aSend, t.b.get(), t.bRecv, 1, salt + i));
}

// Two more batches A -> B: each port of the sending node carries half of their bytes, give or
// take a fifth of that half.
void expectBothPortsCarryHalf(TwoNodes& t, int salt) {
  const uint64_t p0 = portBytes(t.fabric, 1, "mlx5_0:1"), p1 = portBytes(t.fabric, 1, "mlx5_1:1");
  ASSERT_NO_FATAL_FAILURE(exchangeInFlight(t.a.get(), t.aSend, t.b.get(), t.bRecv, 2, salt));
  const double d0 = static_cast<double>(portBytes(t.fabric, 1, "mlx5_0:1") - p0);
  const double d1 = static_cast<double>(portBytes(t.fabric, 1, "mlx5_1:1") - p1);
  EXPECT_GT(d0 + d1, 8 * 100000.0);
  EXPECT_NEAR(d0 / (d0 + d1), 0.5, 0.1) << d0 << " / " << d1 << " bytes on mlx5_0:1 / mlx5_1:1";
}

// mlx5_1 of the nodes in `hosts` goes down after 11 deliveries of a batch of 8 messages in
// flight (every QP on it to the error state, the port inactive); every message stays exact.
void breakMidBatch(TwoNodes& t, std::vector<int> hosts) {
  int deliveries = 0;
  std::function<void()> countdown = [&] {
    if (++deliveries == 11)
      for (int host : hosts) t.fabric.breakPort(host, "mlx5_1:1");  // under the fabric's lock
    else
      t.fabric.onDelivery = countdown;
  };
  ASSERT_NO_FATAL_FAILURE(exchangeInFlight(t.a.get(), t.aSend, t.b.get(), t.bRecv, 3, 20, [&](int batch) {
    if (batch == 1) {
      std::lock_guard<std::recursive_mutex> lk(t.fabric.mu);
      t.fabric.onDelivery = countdown;
    }
  }));
  ASSERT_EQ(deliveries, 11) << "the port was never broken";
}

const char* const kBackInUse =
    "^NET/IB: mlx5_1:1 to peer [0-9.]+:[0-9]+ is in use again: its port answers again on both ends; messages "
    "stripe over mlx5_0:1, mlx5_1:1$";

// A port that went down mid-traffic and came back is taken into use again within
// ACCL_RAIL_RETRY_SEC (1 s here) plus a margin: both ends WARN, then each port carries half of
// every message again, and no message lost or changed a byte on the way. The sending or the
// receiving node's port, with 1 and 2 QPs per port (NCCL_IB_QPS_PER_CONNECTION).
class IbNetRailComesBack : public ::testing::TestWithParam<std::tuple<int, int>> {};
TEST_P(IbNetRailComesBack, APortThatComesBackCarriesHalfOfEveryMessageAgainWithinTheRetryPeriod) {
  const auto [host, nqps] = GetParam();
  TwoNodes t(nqps, {"mlx5_0", "mlx5_1"}, 1);
  ASSERT_NO_FATAL_FAILURE(t.connectBoth());
  WarnCapture warns;
  ASSERT_NO_FATAL_FAILURE(breakMidBatch(t, {host}));
  const uint64_t down = portBytes(t.fabric, 1, "mlx5_1:1");
  ASSERT_NO_FATAL_FAILURE(exchangeInFlight(t.a.get(), t.aSend, t.b.get(), t.bRecv, 1, 30));
  EXPECT_EQ(portBytes(t.fabric, 1, "mlx5_1:1"), down) << "the port carried bytes while it was down";
  t.fabric.portUp(host, "mlx5_1:1");
  const auto upAt = Clock::now();
  ASSERT_NO_FATAL_FAILURE(trafficUntil(t, std::chrono::milliseconds(2500),
                                       [&] { return warns.matching(kBackInUse).size() >= 2; }, 40));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - upAt).count();
  const std::vector<std::string> back = warns.matching(kBackInUse);
  ASSERT_EQ(back.size(), 2u) << "both ends WARN that the port is in use again (" << took << " ms after it came back)";
  EXPECT_NE(back[0], back[1]) << "the two WARNs name each end's own peer";
  EXPECT_LE(took, 2500);
  ASSERT_NO_FATAL_FAILURE(expectBothPortsCarryHalf(t, 50));
  // The other direction, whose comms lost the same port, goes on too.
  ASSERT_NO_FATAL_FAILURE(exchangeInFlight(t.b.get(), t.bSend, t.a.get(), t.aRecv, 2, 60));
}
INSTANTIATE_TEST_SUITE_P(SenderOrReceiverPort, IbNetRailComesBack,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Values(1, 2)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
                           const int qps = std::get<1>(info.param);
                           return std::string(std::get<0>(info.param) == 1 ? "Sender" : "Receiver") + "PortWith" +
                                  std::to_string(qps) + (qps == 1 ? "Qp" : "Qps");
                         });

// When the port comes back on one node while the peer's is still down, it is not taken into
// use (no WARN, not a byte on it, no message held up); once the peer's is back too, it is.
class IbNetRailReturn : public ::testing::TestWithParam<int> {};
TEST_P(IbNetRailReturn, APortIsNotTakenBackWhileThePeersIsStillDown) {
  const int first = GetParam(), second = 3 - first;
  TwoNodes t(1, {"mlx5_0", "mlx5_1"}, 1);
  ASSERT_NO_FATAL_FAILURE(t.connectBoth());
  WarnCapture warns;
  ASSERT_NO_FATAL_FAILURE(breakMidBatch(t, {1, 2}));
  t.fabric.portUp(first, "mlx5_1:1");
  const uint64_t downA = portBytes(t.fabric, 1, "mlx5_1:1");
  ASSERT_NO_FATAL_FAILURE(trafficUntil(t, std::chrono::milliseconds(2500), [] { return false; }, 70));
  EXPECT_TRUE(warns.matching(kBackInUse).empty()) << "taken back while the peer's port was down";
  EXPECT_EQ(portBytes(t.fabric, 1, "mlx5_1:1"), downA);
  t.fabric.portUp(second, "mlx5_1:1");
  ASSERT_NO_FATAL_FAILURE(trafficUntil(t, std::chrono::milliseconds(2500),
                                       [&] { return warns.matching(kBackInUse).size() >= 2; }, 80));
  ASSERT_EQ(warns.matching(kBackInUse).size(), 2u) << "not taken back once both ends were up";
  ASSERT_NO_FATAL_FAILURE(expectBothPortsCarryHalf(t, 90));
}
INSTANTIATE_TEST_SUITE_P(OneEndFirst, IbNetRailReturn, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == 1 ? "SenderPortUpFirst" : "ReceiverPortUpFirst");
                         });

}  // namespace
