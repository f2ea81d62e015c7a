// Tests for topo::railsOf: which admitted interfaces become rails of the chosen one.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <string>
#include <vector>
#include "topo/ifaces.h"
#include "transports/socket/stripe.h"

using namespace accl::topo;

namespace {

NetIf iface(const std::string& name, const std::string& ip, bool running = true) {
  NetIf nif;
  nif.name = name;
  nif.running = running;
  nif.prefixLen = 24;
  auto* sin = reinterpret_cast<sockaddr_in*>(&nif.addr.ss);
  sin->sin_family = AF_INET;
  inet_pton(AF_INET, ip.c_str(), &sin->sin_addr);
  nif.addr.len = sizeof(sockaddr_in);
  return nif;
}

std::string names(const std::vector<NetIf>& ifs) {
  std::string text;
  for (const NetIf& nif : ifs) text += (text.empty() ? "" : ",") + nif.name;
  return text;
}

TEST(Rails, StemIsTheNameWithoutItsTrailingDigits) {
  EXPECT_EQ(interfaceStem("hpn1"), "hpn");
  EXPECT_EQ(interfaceStem("eth10"), "eth");
  EXPECT_EQ(interfaceStem("ens3f0"), "ens3f");
  EXPECT_EQ(interfaceStem("lo"), "lo");
}

TEST(Rails, InterfacesOfTheSameNetworkAreRailsInNameOrder) {
  // Chosen hpn1 (closest NIC) still pairs by name: rail 0 is hpn0 on every host.
  std::vector<NetIf> admitted{iface("hpn1", "10.0.3.1"), iface("eth0", "10.0.1.1"), iface("hpn0", "10.0.2.1")};
  EXPECT_EQ(names(railsOf(admitted, 0, 4)), "hpn0,hpn1");
  EXPECT_EQ(names(railsOf(admitted, 1, 4)), "eth0");
}

TEST(Rails, OneRailWhenLimitedOrAlone) {
  std::vector<NetIf> admitted{iface("hpn1", "10.0.3.1"), iface("hpn0", "10.0.2.1")};
  EXPECT_EQ(names(railsOf(admitted, 0, 1)), "hpn1");  // the chosen one, not rail 0 by name
  EXPECT_EQ(names(railsOf({iface("eth0", "10.0.1.1")}, 0, 4)), "eth0");
}

TEST(Rails, LoopbackAndDownInterfacesAreNeverRails) {
  std::vector<NetIf> admitted{iface("lo", "127.0.0.1"), iface("lo1", "127.0.0.2"), iface("hpn0", "10.0.2.1"),
                              iface("hpn1", "10.0.3.1", false)};
  EXPECT_EQ(names(railsOf(admitted, 0, 4)), "lo");
  EXPECT_EQ(names(railsOf(admitted, 2, 4)), "hpn0");
}

TEST(Rails, AtMostMaxRailsAndTheChosenOneAmongThem) {
  std::vector<NetIf> admitted{iface("hpn3", "10.0.5.1"), iface("hpn0", "10.0.2.1"), iface("hpn1", "10.0.3.1"),
                              iface("hpn2", "10.0.4.1")};
  EXPECT_EQ(names(railsOf(admitted, 0, 2)), "hpn0,hpn3");
  EXPECT_EQ(names(railsOf(admitted, 2, 2)), "hpn0,hpn1");
}

// Failover resends a stripe from the peer's cursor out of a copy indexed by the stripe's own
// byte count: that count must follow the stripe exactly (chunk 4, 3 sockets).
TEST(Rails, SubIndexCountsTheBytesOfOneStripe) {
  const accl::Stripe st{4, 3};
  uint64_t count[3] = {0, 0, 0};
  for (uint64_t pos = 0; pos < 120; pos++) {
    const int s = st.socketOf(pos);
    EXPECT_EQ(st.subIndex(pos), count[s]) << "pos " << pos;
    count[s]++;
  }
  // A cursor that crossed a chunk end (Stripe::advance) names the stripe's next byte.
  EXPECT_EQ(st.advance(4, 4), 16u);
  EXPECT_EQ(st.subIndex(16), 4u);
}

}  // namespace
