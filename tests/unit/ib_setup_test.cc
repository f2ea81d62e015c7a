// IB connection setup rules on a fake device (no RDMA hardware here): GID choice with
// NCCL_IB_GID_INDEX / RoCE v2, the QP info carried in the connect handle, NCCL_IB_TIMEOUT and
// NCCL_IB_RETRY_CNT reaching the QP attributes, and the registration cache's refcounts.
#include <gtest/gtest.h>
#include <map>
#include <vector>
#include "transports/ib/ib_setup.h"

using namespace accl::ib;

namespace {

// Records what the setup code asks of the device.
class RecordingVerbs final : public Verbs {
 public:
  int regs = 0, deregs = 0;
  std::map<uint32_t, std::vector<std::pair<QpState, QpAttrs>>> transitions;
  ncclResult_t queryPort(PortInfo*) override { return ncclSuccess; }
  ncclResult_t queryGids(std::vector<GidEntry>*) override { return ncclSuccess; }
  ncclResult_t allocPd(uint64_t* pd) override { *pd = 1; return ncclSuccess; }
  ncclResult_t regMr(uint64_t, void*, size_t, uint64_t* mr, MrKeys* keys) override {
    *mr = static_cast<uint64_t>(++regs);
    *keys = {static_cast<uint32_t>(100 + regs), static_cast<uint32_t>(200 + regs)};
    return ncclSuccess;
  }
  ncclResult_t deregMr(uint64_t) override { deregs++; return ncclSuccess; }
  ncclResult_t createCq(int, uint64_t* cq) override { *cq = 1; return ncclSuccess; }
  ncclResult_t createQp(uint64_t, uint64_t, uint32_t* qpn) override { *qpn = 7; return ncclSuccess; }
  ncclResult_t modifyQp(uint32_t qpn, QpState s, const QpAttrs& a) override {
    transitions[qpn].push_back({s, a});
    return ncclSuccess;
  }
  ncclResult_t postWrite(uint32_t, uint64_t, const void*, uint32_t, size_t, uint64_t, uint32_t, bool, uint32_t) override {
    return ncclSuccess;
  }
  ncclResult_t postRecv(uint32_t, uint64_t) override { return ncclSuccess; }
  ncclResult_t pollCq(uint64_t, std::vector<WorkCompletion>*) override { return ncclSuccess; }
};

Gid ipv4Gid(uint8_t last) {
  Gid g{};
  g[10] = g[11] = 0xff;
  g[12] = 10; g[15] = last;
  return g;
}
Gid linkLocal() {
  Gid g{};
  g[0] = 0xfe; g[1] = 0x80; g[15] = 1;
  return g;
}

// A typical RoCE table: v1 and v2 of the link-local address, then v1 and v2 of an IPv4 one.
const std::vector<GidEntry> kRoceGids = {
    {0, linkLocal(), GidType::IbOrRoceV1}, {1, linkLocal(), GidType::RoceV2},
    {2, ipv4Gid(1), GidType::IbOrRoceV1}, {3, ipv4Gid(1), GidType::RoceV2}};

TEST(IbSetup, RoceChoosesTheV2GidHoldingAnIpv4Address) {
  std::string why;
  PortInfo roce{0, true, 1024};
  EXPECT_EQ(selectGid(kRoceGids, roce, IbConfig{}, &why), 3);
  IbConfig v1;
  v1.roceVersion = 1;
  EXPECT_EQ(selectGid(kRoceGids, roce, v1, &why), 2);
  std::vector<GidEntry> noIpv4 = {kRoceGids[0], kRoceGids[1]};
  EXPECT_EQ(selectGid(noIpv4, roce, IbConfig{}, &why), 1);
  std::vector<GidEntry> onlyV1 = {kRoceGids[0], kRoceGids[2]};
  EXPECT_EQ(selectGid(onlyV1, roce, IbConfig{}, &why), -1);
  EXPECT_NE(why.find("RoCE v2"), std::string::npos) << why;
}

TEST(IbSetup, GidIndexParameterWinsAndMustExist) {
  std::string why;
  IbConfig cfg;
  cfg.gidIndex = 0;
  EXPECT_EQ(selectGid(kRoceGids, PortInfo{0, true, 1024}, cfg, &why), 0);
  cfg.gidIndex = 9;
  EXPECT_EQ(selectGid(kRoceGids, PortInfo{0, true, 1024}, cfg, &why), -1);
  EXPECT_NE(why.find("NCCL_IB_GID_INDEX=9"), std::string::npos) << why;
  EXPECT_EQ(selectGid({{0, linkLocal(), GidType::IbOrRoceV1}}, PortInfo{5, false, 4096}, IbConfig{}, &why), 0);
}

TEST(IbSetup, QpInfoRoundTripsThroughTheConnectHandle) {
  QpInfo in;
  in.lid = 42; in.global = 1; in.nqps = 3; in.psn = 0x123456; in.gid = ipv4Gid(9);
  in.qpn[0] = 11; in.qpn[1] = 12; in.qpn[2] = 13; in.fifoAddr = 0xdeadbeef000; in.fifoRkey = 77; in.mtu = 1024;
  unsigned char handle[128];
  encodeQpInfo(in, handle, sizeof handle);
  QpInfo out;
  std::string why;
  ASSERT_TRUE(decodeQpInfo(handle, sizeof handle, &out, &why)) << why;
  EXPECT_EQ(out.lid, 42); EXPECT_EQ(out.nqps, 3); EXPECT_EQ(out.psn, 0x123456u); EXPECT_EQ(out.gid, in.gid);
  EXPECT_EQ(out.qpn[2], 13u); EXPECT_EQ(out.fifoAddr, 0xdeadbeef000u); EXPECT_EQ(out.fifoRkey, 77u);
  handle[offsetof(QpInfo, nqps)] = 0;
  EXPECT_FALSE(decodeQpInfo(handle, sizeof handle, &out, &why));
  EXPECT_NE(why.find("0 QPs"), std::string::npos) << why;
  EXPECT_FALSE(decodeQpInfo(handle, 8, &out, &why));
}

TEST(IbSetup, TimeoutRetryAndPeerAddressReachTheQpAttributes) {
  RecordingVerbs verbs;
  IbConfig cfg;
  cfg.timeout = 14; cfg.retryCnt = 3;
  QpInfo local, remote;
  local.nqps = remote.nqps = 2; local.mtu = 4096; remote.mtu = 1024;
  local.psn = 5; remote.psn = 9; remote.lid = 3; remote.global = 1; remote.gid = ipv4Gid(2);
  remote.qpn[0] = 100; remote.qpn[1] = 101;
  ASSERT_EQ(verbs.modifyQp(7, QpState::Rtr, rtrAttrs(local, remote, 1, 3)), ncclSuccess);
  ASSERT_EQ(verbs.modifyQp(7, QpState::Rts, rtsAttrs(local, cfg)), ncclSuccess);
  const auto& t = verbs.transitions[7];
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].second.remoteQpn, 101u);
  EXPECT_EQ(t[0].second.remotePsn, 9u);
  EXPECT_EQ(t[0].second.dlid, 3);
  EXPECT_TRUE(t[0].second.global);
  EXPECT_EQ(t[0].second.dgid, remote.gid);
  EXPECT_EQ(t[0].second.sgidIndex, 3);
  EXPECT_EQ(t[0].second.mtu, 1024);
  EXPECT_EQ(t[1].second.localPsn, 5u);
  EXPECT_EQ(t[1].second.timeout, 14);
  EXPECT_EQ(t[1].second.retryCnt, 3);
}

TEST(IbSetup, RegistrationCacheReusesCoveringMrsAndDeregistersByRefcount) {
  RecordingVerbs verbs;
  std::vector<char> buf(1 << 16);
  {
    MrCache cache(verbs, 1);
    MrKeys k1, k2, k3;
    uint64_t h1, h2, h3;
    ASSERT_EQ(cache.reg(buf.data(), buf.size(), &k1, &h1), ncclSuccess);
    ASSERT_EQ(cache.reg(buf.data() + 100, 1000, &k2, &h2), ncclSuccess);  // inside: reused
    EXPECT_EQ(h1, h2);
    EXPECT_EQ(k1.rkey, k2.rkey);
    EXPECT_EQ(verbs.regs, 1);
    ASSERT_EQ(cache.dereg(h2), ncclSuccess);
    EXPECT_EQ(verbs.deregs, 0);
    ASSERT_EQ(cache.dereg(h1), ncclSuccess);
    EXPECT_EQ(verbs.deregs, 1);
    EXPECT_EQ(cache.liveRegistrations(), 0u);
    EXPECT_EQ(cache.dereg(h1), ncclInvalidArgument);
    ASSERT_EQ(cache.reg(buf.data(), 10, &k3, &h3), ncclSuccess);
    EXPECT_EQ(verbs.regs, 2);
  }
  EXPECT_EQ(verbs.deregs, 2);  // the cache releases what is left when it goes
}

}  // namespace

#include "transports/ib/verbs_system.h"
namespace {
// This machine has no RDMA device: opening one through libibverbs fails with a reason.
TEST(IbSetup, SystemVerbsOnAMissingDeviceFailsWithAReason) {
  std::string why;
  EXPECT_EQ(accl::ib::openSystemVerbs("accl_no_such_hca", 1, &why), nullptr);
  EXPECT_FALSE(why.empty());
}
}  // namespace
