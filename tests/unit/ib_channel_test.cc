// The IB data-path protocol on the in-process fake fabric (tests/unit/ib_fake_verbs.h):
// handshake and QP bring-up, writes with immediate carrying sizes, receiver credits, several
// QPs per connection, completion errors and a dead peer.
#include <gtest/gtest.h>
#include <numeric>
#include <vector>
#include "transports/ib/ib_channel.h"
#include "unit/ib_fake_verbs.h"

using namespace accl::ib;

namespace {

Gid roceV2Gid(uint8_t host) {
  Gid g{};
  g[10] = g[11] = 0xff;
  g[12] = 192; g[13] = 168; g[15] = host;
  return g;
}

// Two ranks' worth of one direction: A sends, B receives, over `nqps` QPs.
struct Pair {
  fake::Fabric fabric;
  fake::Verbs va{fabric, PortInfo{0, true, 4096}, {{0, Gid{}, GidType::IbOrRoceV1}, {1, roceV2Gid(1), GidType::RoceV2}}};
  fake::Verbs vb{fabric, PortInfo{0, true, 1024}, {{0, Gid{}, GidType::IbOrRoceV1}, {1, roceV2Gid(2), GidType::RoceV2}}};
  IbConfig cfg;
  std::unique_ptr<IbQpSet> qa, qb;
  std::unique_ptr<IbSender> sender;
  std::unique_ptr<IbReceiver> receiver;
  QpInfo infoA, infoB;

  explicit Pair(int nqps, int timeout = 20, int retry = 7) {
    cfg.qpsPerConn = nqps; cfg.timeout = timeout; cfg.retryCnt = retry;
    qa = std::make_unique<IbQpSet>(va, cfg, "rank 1 (hostB)");
    qb = std::make_unique<IbQpSet>(vb, cfg, "rank 0 (hostA)");
    EXPECT_EQ(qa->create(1000, &infoA), ncclSuccess);
    EXPECT_EQ(qb->create(2000, &infoB), ncclSuccess);
    sender = std::make_unique<IbSender>(*qa);
    receiver = std::make_unique<IbReceiver>(*qb);
    EXPECT_EQ(sender->init(&infoA), ncclSuccess);
    // The records cross through a 128-byte connect handle, as over the bootstrap.
    unsigned char ha[128], hb[128];
    encodeQpInfo(infoA, ha, sizeof ha);
    encodeQpInfo(infoB, hb, sizeof hb);
    QpInfo gotA, gotB;
    std::string why;
    EXPECT_TRUE(decodeQpInfo(ha, sizeof ha, &gotA, &why)) << why;
    EXPECT_TRUE(decodeQpInfo(hb, sizeof hb, &gotB, &why)) << why;
    EXPECT_EQ(qa->connect(infoA, gotB), ncclSuccess);
    EXPECT_EQ(qb->connect(infoB, gotA), ncclSuccess);
    EXPECT_EQ(receiver->init(gotA), ncclSuccess);
  }
};

TEST(IbChannel, HandshakeBringsEveryQpToRtsWithPeerAddressTimeoutAndRetry) {
  Pair p(3, 18, 5);
  ASSERT_EQ(p.qa->qpns().size(), 3u);
  for (size_t i = 0; i < 3; i++) {
    const auto& t = p.fabric.qps.at(p.qa->qpns()[i]).transitions;
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t[1].first, QpState::Rtr);
    EXPECT_EQ(t[1].second.remoteQpn, p.qb->qpns()[i]);  // QP i pairs with the peer's QP i
    EXPECT_EQ(t[1].second.remotePsn, 2000u);
    EXPECT_TRUE(t[1].second.global);
    EXPECT_EQ(t[1].second.dgid, roceV2Gid(2));
    EXPECT_EQ(t[1].second.sgidIndex, 1);  // the RoCE v2 GID
    EXPECT_EQ(t[1].second.mtu, 1024);     // the smaller of both ports
    EXPECT_EQ(t[2].first, QpState::Rts);
    EXPECT_EQ(t[2].second.localPsn, 1000u);
    EXPECT_EQ(t[2].second.timeout, 18);
    EXPECT_EQ(t[2].second.retryCnt, 5);
  }
}

// A pair whose sender has `src` registered and whose receiver has `dst`; call
// ASSERT_NO_FATAL_FAILURE(p.registerBuffers()) before using the keys.
struct PairWithBuffers : Pair {
  PairWithBuffers(int nqps, size_t srcBytes, size_t dstBytes)
      : Pair(nqps), src(srcBytes), dst(dstBytes), ca(va, qa->pd()), cb(vb, qb->pd()) {}
  void registerBuffers() {
    uint64_t h;
    ASSERT_EQ(ca.reg(src.data(), src.size(), &ks, &h), ncclSuccess);
    ASSERT_EQ(cb.reg(dst.data(), dst.size(), &kd, &h), ncclSuccess);
  }
  std::vector<char> src, dst;
  MrCache ca, cb;
  MrKeys ks, kd;
};

// Sends `n` messages of varying sizes, each waiting for the receiver's credit first.
void exchange(Pair& p, int n) {
  std::vector<char> src(5000), dst(8192);
  MrCache ca(p.va, p.qa->pd()), cb(p.vb, p.qb->pd());
  MrKeys ks, kd;
  uint64_t hs, hd;
  ASSERT_EQ(ca.reg(src.data(), src.size(), &ks, &hs), ncclSuccess);
  ASSERT_EQ(cb.reg(dst.data(), dst.size(), &kd, &hd), ncclSuccess);
  for (int m = 0; m < n; m++) {
    size_t size = static_cast<size_t>(1 + (m * 977) % 5000);
    for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<char>(i * 7 + m);
    int64_t sreq = 0, rreq = 0;
    ASSERT_EQ(p.sender->isend(src.data(), size, ks.lkey, &sreq), ncclSuccess);
    EXPECT_EQ(sreq, -1) << "sent before the receiver posted a buffer";
    ASSERT_EQ(p.receiver->irecv(dst.data(), dst.size(), kd.rkey, &rreq), ncclSuccess);
    ASSERT_EQ(rreq, m);
    ASSERT_EQ(p.sender->isend(src.data(), size, ks.lkey, &sreq), ncclSuccess);
    ASSERT_EQ(sreq, m);
    bool sdone = false, rdone = false;
    size_t got = 0, sent = 0;
    for (int spin = 0; spin < 100 && !(sdone && rdone); spin++) {
      ASSERT_EQ(p.sender->test(sreq, &sdone, &sent), ncclSuccess);
      ASSERT_EQ(p.receiver->test(rreq, &rdone, &got), ncclSuccess);
    }
    ASSERT_TRUE(sdone && rdone);
    EXPECT_EQ(got, size);
    EXPECT_EQ(sent, size);
    ASSERT_EQ(std::memcmp(src.data(), dst.data(), size), 0) << "message " << m;
  }
  EXPECT_EQ(p.fabric.rnrErrors, 0);
}

TEST(IbChannel, MessagesLandWithSizesFromImmediateData) { Pair p(1); exchange(p, 20); }
TEST(IbChannel, MessagesSplitAcrossSeveralQps) {
  Pair p(3);
  exchange(p, 20);
  // Every QP carried data: 20 messages, one receive consumed per QP per message.
  for (uint32_t qpn : p.qb->qpns()) EXPECT_TRUE(p.fabric.qps.at(qpn).recvs.empty());
}

TEST(IbChannel, ReceiverCreditsBoundTheMessagesInFlight) {
  Pair p(2);
  std::vector<char> buf(64 * kIbMaxInflight * 2);
  MrCache ca(p.va, p.qa->pd()), cb(p.vb, p.qb->pd());
  MrKeys k;
  uint64_t h;
  ASSERT_EQ(ca.reg(buf.data(), buf.size(), &k, &h), ncclSuccess);
  MrKeys kb;
  std::vector<char> dst(buf.size());
  ASSERT_EQ(cb.reg(dst.data(), dst.size(), &kb, &h), ncclSuccess);
  std::vector<int64_t> rreqs;
  for (int i = 0; i < kIbMaxInflight + 2; i++) {
    int64_t r;
    ASSERT_EQ(p.receiver->irecv(dst.data() + 64 * i, 64, kb.rkey, &r), ncclSuccess);
    if (r >= 0) rreqs.push_back(r);
  }
  EXPECT_EQ(rreqs.size(), static_cast<size_t>(kIbMaxInflight));  // the rest must wait
  int sent = 0;
  for (int i = 0; i < kIbMaxInflight + 2; i++) {
    int64_t s;
    ASSERT_EQ(p.sender->isend(buf.data() + 64 * i, 64, k.lkey, &s), ncclSuccess);
    if (s >= 0) sent++;
  }
  EXPECT_EQ(sent, kIbMaxInflight);  // exactly one message per credit
  EXPECT_EQ(p.fabric.rnrErrors, 0);
}

// The receiver can finish a message and post the next credit for the same FIFO slot while
// the sender is still inside isend for that message (it ran on another thread, or the NIC
// was fast): the sender must not erase that credit, or the message after it never goes.
TEST(IbChannel, ACreditPostedWhileTheSenderIsStillPostingIsNotLost) {
  PairWithBuffers p(1, 64, 64 * kIbMaxInflight);
  ASSERT_NO_FATAL_FAILURE(p.registerBuffers());
  std::vector<int64_t> rreqs;
  for (int i = 0; i < kIbMaxInflight; i++) {
    int64_t r = -1;
    ASSERT_EQ(p.receiver->irecv(p.dst.data() + 64 * i, 64, p.kd.rkey, &r), ncclSuccess);
    rreqs.push_back(r);
  }
  int64_t again = -1;
  p.fabric.onDelivery = [&] {  // message 0 landed: the receiver takes it and reposts slot 0
    bool done = false;
    size_t n = 0;
    ASSERT_EQ(p.receiver->test(rreqs[0], &done, &n), ncclSuccess);
    ASSERT_TRUE(done);
    ASSERT_EQ(p.receiver->irecv(p.dst.data(), 64, p.kd.rkey, &again), ncclSuccess);
  };
  for (int i = 0; i <= kIbMaxInflight; i++) {
    int64_t s = -1;
    for (int spin = 0; spin < 100 && s < 0; spin++) ASSERT_EQ(p.sender->isend(p.src.data(), 64, p.ks.lkey, &s), ncclSuccess);
    ASSERT_EQ(s, i) << "message " << i << " found no credit";
  }
  EXPECT_EQ(again, kIbMaxInflight);
  EXPECT_EQ(p.fabric.rnrErrors, 0);
}

TEST(IbChannel, MessageLargerThanThePostedReceiveIsRefused) {
  PairWithBuffers p(1, 256, 128);
  ASSERT_NO_FATAL_FAILURE(p.registerBuffers());
  int64_t r, s;
  ASSERT_EQ(p.receiver->irecv(p.dst.data(), p.dst.size(), p.kd.rkey, &r), ncclSuccess);
  EXPECT_EQ(p.sender->isend(p.src.data(), p.src.size(), p.ks.lkey, &s), ncclInvalidUsage);
}

TEST(IbChannel, ErrorCompletionFailsTheRequestNamingThePeer) {
  PairWithBuffers p(2, 100, 100);
  ASSERT_NO_FATAL_FAILURE(p.registerBuffers());
  int64_t r, s;
  ASSERT_EQ(p.receiver->irecv(p.dst.data(), p.dst.size(), p.kd.rkey, &r), ncclSuccess);
  p.fabric.failNextWrite = "Local Protection Error";
  ASSERT_EQ(p.sender->isend(p.src.data(), p.src.size(), p.ks.lkey, &s), ncclSuccess);
  bool done = false;
  EXPECT_EQ(p.sender->test(s, &done, nullptr), ncclRemoteError);
  EXPECT_FALSE(done);
  EXPECT_NE(p.sender->error().find("rank 1 (hostB)"), std::string::npos) << p.sender->error();
  EXPECT_NE(p.sender->error().find("Local Protection Error"), std::string::npos) << p.sender->error();
  EXPECT_EQ(p.sender->test(s, &done, nullptr), ncclRemoteError);  // stays failed
}

TEST(IbChannel, DeadPeerIsACleanErrorOnBothSides) {
  PairWithBuffers p(2, 100, 100);
  ASSERT_NO_FATAL_FAILURE(p.registerBuffers());
  int64_t r, s;
  ASSERT_EQ(p.receiver->irecv(p.dst.data(), p.dst.size(), p.kd.rkey, &r), ncclSuccess);
  // The sender's host dies: its QPs error, the receiver's posted receives are flushed.
  for (uint32_t qpn : p.qa->qpns()) p.fabric.breakQp(qpn);
  for (uint32_t qpn : p.qb->qpns()) p.fabric.breakQp(qpn);
  bool done = false;
  EXPECT_EQ(p.receiver->test(r, &done, nullptr), ncclRemoteError);
  EXPECT_NE(p.receiver->error().find("rank 0 (hostA)"), std::string::npos) << p.receiver->error();
  EXPECT_NE(p.receiver->error().find("Flushed"), std::string::npos) << p.receiver->error();
  ASSERT_EQ(p.sender->isend(p.src.data(), p.src.size(), p.ks.lkey, &s), ncclSuccess);
  ASSERT_EQ(s, 0);  // the credit arrived before the death
  EXPECT_EQ(p.sender->test(s, &done, nullptr), ncclRemoteError);
  EXPECT_NE(p.sender->error().find("Retry Counter Exceeded"), std::string::npos) << p.sender->error();
  EXPECT_FALSE(done);
}

// How a port that came back is used again (ib_rail_return.h), on the fake's verbs rules: a QP
// in the error state only goes to Reset, takes no receive there, then INIT -> RTR -> RTS with
// the first exchange's records; the peer's QPs go through Error and Reset too; messages flow.
TEST(IbChannel, AQpInTheErrorStateComesBackOnlyThroughResetWithTheFirstRecords) {
  Pair p(2);
  p.fabric.breakPort(0, "");  // every QP of the fake pair is on host 0's unnamed port
  PortInfo port;
  ASSERT_EQ(p.va.queryPort(&port), ncclSuccess);
  EXPECT_FALSE(port.active);
  p.fabric.portUp(0, "");
  ASSERT_EQ(p.va.queryPort(&port), ncclSuccess);
  EXPECT_TRUE(port.active);
  EXPECT_EQ(p.qa->moveAll(QpState::Rts, p.infoA, p.infoB), ncclSystemError);
  EXPECT_EQ(p.qa->moveAll(QpState::Init, p.infoA, p.infoB), ncclSystemError);
  ASSERT_EQ(p.qa->moveAll(QpState::Reset, p.infoA, p.infoB), ncclSuccess);
  EXPECT_EQ(p.va.postRecv(p.qa->qpns()[0], 1), ncclSystemError);
  EXPECT_EQ(p.qa->moveAll(QpState::Rtr, p.infoA, p.infoB), ncclSystemError);
  for (QpState s : {QpState::Init, QpState::Rtr, QpState::Rts})
    ASSERT_EQ(p.qa->moveAll(s, p.infoA, p.infoB), ncclSuccess);
  for (QpState s : {QpState::Error, QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts})
    ASSERT_EQ(p.qb->moveAll(s, p.infoB, p.infoA), ncclSuccess);
  exchange(p, 5);
}

TEST(IbChannel, QpsPerConnectionOutOfRangeIsRefused) {
  fake::Fabric f;
  fake::Verbs v(f, PortInfo{1, false, 4096}, {{0, Gid{}, GidType::IbOrRoceV1}});
  IbConfig cfg;
  cfg.qpsPerConn = kMaxQpsPerConn + 1;
  IbQpSet qs(v, cfg, "rank 1");
  QpInfo info;
  EXPECT_EQ(qs.create(1, &info), ncclInvalidArgument);
}

}  // namespace
