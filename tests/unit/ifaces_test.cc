// Tests for src/topo: NCCL_SOCKET_IFNAME grammar, interface selection order (on injected
// interface lists), subnet matching and host identity.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "base/log.h"
#include "topo/ifaces.h"

using namespace accl;
using namespace accl::topo;

namespace {

NetIf iface(const std::string& name, const std::string& ip, bool running = true, int prefixLen = 24) {
  NetIf nif;
  nif.name = name;
  nif.running = running;
  nif.prefixLen = prefixLen;
  if (ip.find(':') != std::string::npos) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&nif.addr.ss);
    sin6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, ip.c_str(), &sin6->sin6_addr);
    nif.addr.len = sizeof(sockaddr_in6);
  } else {
    auto* sin = reinterpret_cast<sockaddr_in*>(&nif.addr.ss);
    sin->sin_family = AF_INET;
    inet_pton(AF_INET, ip.c_str(), &sin->sin_addr);
    nif.addr.len = sizeof(sockaddr_in);
  }
  return nif;
}

std::vector<std::string> namesOf(const std::vector<NetIf>& ifs) {
  std::vector<std::string> names;
  for (const NetIf& nif : ifs) names.push_back(nif.name);
  return names;
}

// Runs the selection on `all` and returns the chosen names (empty on error).
std::vector<std::string> select(const std::vector<NetIf>& all, const std::string& ifname = "",
                                const std::string& family = "", const std::string& commId = "",
                                int maxIfs = 16, std::string* reason = nullptr) {
  std::vector<NetIf> out;
  if (selectFrom({all, ifname, family, commId}, maxIfs, &out, reason) != ncclSuccess) return {};
  return namesOf(out);
}

bool matches(const std::string& spec, const std::string& name) { return matchesSpec(parseIfnameSpec(spec), name); }

using Names = std::vector<std::string>;

}  // namespace

TEST(IfnameSpec, PlainItemMatchesNamesStartingWithIt) {
  EXPECT_TRUE(matches("eth", "eth0"));
  EXPECT_TRUE(matches("eth", "eth10"));
  EXPECT_FALSE(matches("eth", "veth0"));
  EXPECT_FALSE(matches("eth0", "eth"));
}

TEST(IfnameSpec, CaretExcludesPrefixMatches) {
  EXPECT_FALSE(matches("^docker", "docker0"));
  EXPECT_TRUE(matches("^docker", "eth0"));
}

TEST(IfnameSpec, EqualsRequiresTheExactName) {
  EXPECT_TRUE(matches("=eth0", "eth0"));
  EXPECT_FALSE(matches("=eth0", "eth01"));
  EXPECT_FALSE(matches("=eth", "eth0"));
}

TEST(IfnameSpec, CaretEqualsExcludesOnlyTheExactName) {
  EXPECT_FALSE(matches("^=docker0", "docker0"));
  EXPECT_TRUE(matches("^=docker0", "docker01"));
  EXPECT_TRUE(matches("^=docker0", "eth0"));
}

TEST(IfnameSpec, EqualsBeforeCaretMakesTheCaretPartOfTheName) {
  IfnameSpec spec = parseIfnameSpec("=^x");
  EXPECT_TRUE(spec.exact);
  EXPECT_FALSE(spec.exclude);
  EXPECT_EQ(spec.items, Names{"^x"});
}

TEST(IfnameSpec, ListMatchesAnyItemAndFlagsApplyToTheWholeList) {
  EXPECT_TRUE(matches("eth,ib", "ib0"));
  EXPECT_TRUE(matches("=eth0,ib0", "ib0"));
  EXPECT_FALSE(matches("=eth0,ib0", "ib01"));
  EXPECT_FALSE(matches("^docker,lo", "lo"));
  EXPECT_FALSE(matches("^docker,lo", "docker1"));
  EXPECT_TRUE(matches("^docker,lo", "eth0"));
}

TEST(IfnameSpec, PortSuffixIsIgnored) {
  IfnameSpec spec = parseIfnameSpec("=eth0:1234,ib0:1");
  EXPECT_EQ(spec.items, (Names{"eth0", "ib0"}));
  EXPECT_TRUE(matchesSpec(spec, "eth0"));
}

TEST(IfnameSpec, EmptyItemsAreSkipped) {
  EXPECT_EQ(parseIfnameSpec(",,eth,,ib,").items, (Names{"eth", "ib"}));
}

TEST(IfnameSpec, KeepsAtMostSixteenItems) {
  std::string text;
  for (int i = 0; i < 17; ++i) text += "if" + std::to_string(i) + ",";
  IfnameSpec spec = parseIfnameSpec("=" + text);
  EXPECT_EQ(spec.items.size(), 16u);
  EXPECT_TRUE(matchesSpec(spec, "if15"));
  EXPECT_FALSE(matchesSpec(spec, "if16"));
}

TEST(IfnameSpec, EmptyListMatchesEverythingAndCaretAloneNothing) {
  EXPECT_TRUE(matches("", "eth0"));
  EXPECT_FALSE(matches("^", "eth0"));
}

TEST(SelectInterfaces, SetIfnameUsesMatchesInEnumerationOrder) {
  std::vector<NetIf> all{iface("eth1", "10.0.1.2"), iface("ib0", "10.1.0.2"), iface("eth0", "10.0.0.2")};
  EXPECT_EQ(select(all, "eth"), (Names{"eth1", "eth0"}));
  EXPECT_EQ(select(all, "^eth"), Names{"ib0"});
  EXPECT_EQ(select(all, "=eth0,eth1"), (Names{"eth1", "eth0"}));
}

TEST(SelectInterfaces, SetIfnameSkipsTheAutomaticPreferences) {
  std::vector<NetIf> all{iface("hpn0", "10.9.0.2"), iface("ib0", "10.1.0.2"), iface("eth0", "10.0.0.2")};
  EXPECT_EQ(select(all, "eth0"), Names{"eth0"});
  EXPECT_EQ(select(all, "^hpn"), (Names{"ib0", "eth0"}));
}

TEST(SelectInterfaces, OneCharacterIfnameCountsAsUnset) {
  std::vector<NetIf> all{iface("lo", "127.0.0.1", true, 8), iface("eth0", "10.0.0.2")};
  EXPECT_EQ(select(all, "l"), Names{"eth0"});
  EXPECT_EQ(select(all, "^"), Names{"eth0"});
}

TEST(SelectInterfaces, NoMatchIsInvalidUsageListingTheInterfacesPresent) {
  std::vector<NetIf> all{iface("eth0", "10.0.0.2"), iface("lo", "127.0.0.1", true, 8)};
  std::vector<NetIf> out;
  EXPECT_EQ(selectFrom({all, "foo", "", ""}, 1, &out), ncclInvalidUsage);
  EXPECT_STREQ(lastErrorText(),
               "NCCL_SOCKET_IFNAME=foo matches no usable interface; interfaces present: eth0 (10.0.0.2), lo (127.0.0.1)");
}

TEST(SelectInterfaces, HpnInterfaceWinsWhenIfnameIsUnset) {
  std::vector<NetIf> all{iface("eth0", "10.0.0.2"), iface("ib0", "10.1.0.2"), iface("hpn0", "10.9.0.2")};
  std::string reason;
  EXPECT_EQ(select(all, "", "", "", 1, &reason), Names{"hpn0"});
  EXPECT_NE(reason.find("HPN"), std::string::npos) << reason;
}

TEST(SelectInterfaces, HpnInterfaceThatIsNotRunningIsPassedOver) {
  std::vector<NetIf> all{iface("hpn0", "10.9.0.2", false), iface("eth0", "10.0.0.2")};
  EXPECT_EQ(select(all), Names{"eth0"});
}

TEST(SelectInterfaces, IbComesBeforeEthernetByDefault) {
  std::vector<NetIf> all{iface("eth0", "10.0.0.2"), iface("ib0", "10.1.0.2")};
  EXPECT_EQ(select(all), Names{"ib0"});
}

TEST(SelectInterfaces, CommIdSubnetComesBeforeOtherInterfaces) {
  std::vector<NetIf> all{iface("eth0", "10.0.0.2"), iface("eth1", "192.168.1.2")};
  std::string reason;
  EXPECT_EQ(select(all, "", "", "192.168.1.77:5000", 16, &reason), Names{"eth1"});
  EXPECT_NE(reason.find("NCCL_COMM_ID"), std::string::npos) << reason;
  EXPECT_EQ(select(all, "", "", "172.16.0.1:5000"), (Names{"eth0", "eth1"}));
}

TEST(SelectInterfaces, DockerLoopbackAndVirbrAreUsedOnlyWhenNothingElseExists) {
  NetIf lo = iface("lo", "127.0.0.1", true, 8), docker = iface("docker0", "172.17.0.1");
  NetIf virbr = iface("virbr0", "192.168.122.1"), eth = iface("eth0", "10.0.0.2");
  EXPECT_EQ(select({lo, docker, virbr, eth}), Names{"eth0"});
  EXPECT_EQ(select({lo, virbr, docker}), Names{"docker0"});
  EXPECT_EQ(select({virbr, lo}), Names{"lo"});
  EXPECT_EQ(select({virbr}), Names{"virbr0"});
}

TEST(SelectInterfaces, InterfacesThatAreNotRunningAreNeverChosen) {
  EXPECT_EQ(select({iface("eth0", "10.0.0.2", false), iface("eth1", "10.0.1.2")}, "eth"), Names{"eth1"});
  std::vector<NetIf> out;
  EXPECT_EQ(selectFrom({{iface("eth0", "10.0.0.2", false)}, "", "", ""}, 1, &out), ncclInvalidUsage);
}

TEST(SelectInterfaces, AnInterfaceIsTakenOnceWithItsFirstAddress) {
  std::vector<NetIf> all{iface("eth0", "10.0.0.2"), iface("eth0", "fd00::2", true, 64), iface("eth1", "10.0.1.2")};
  std::vector<NetIf> out;
  ASSERT_EQ(selectFrom({all, "", "", ""}, 16, &out), ncclSuccess);
  ASSERT_EQ(namesOf(out), (Names{"eth0", "eth1"}));
  EXPECT_EQ(out[0].addr.family(), AF_INET);
}

TEST(SelectInterfaces, SocketFamilyRestrictsTheAddressFamily) {
  std::vector<NetIf> all{iface("eth0", "10.0.0.2"), iface("eth0", "fd00::2", true, 64), iface("eth1", "10.0.1.2")};
  std::vector<NetIf> out;
  ASSERT_EQ(selectFrom({all, "", "AF_INET6", ""}, 16, &out), ncclSuccess);
  ASSERT_EQ(namesOf(out), Names{"eth0"});
  EXPECT_EQ(out[0].addr.family(), AF_INET6);
  EXPECT_EQ(select(all, "", "AF_INET"), (Names{"eth0", "eth1"}));
  EXPECT_EQ(select(all, "", "af_inet6"), (Names{"eth0", "eth1"}));  // not exact: either family
}

TEST(SelectInterfaces, MaxIfsLimitsHowManyAreReturned) {
  std::vector<NetIf> all{iface("eth0", "10.0.0.2"), iface("eth1", "10.0.1.2"), iface("eth2", "10.0.2.2")};
  EXPECT_EQ(select(all, "eth", "", "", 2), (Names{"eth0", "eth1"}));
  EXPECT_EQ(select(all, "", "", "", 1), Names{"eth0"});
}

TEST(SameSubnet, ComparesOnlyThePrefixBits) {
  net::SockAddr a;
  ASSERT_EQ(net::parseHostPort("10.0.0.200:1", &a), ncclSuccess);
  EXPECT_TRUE(sameSubnet(iface("eth0", "10.0.0.2", true, 24), a));
  EXPECT_FALSE(sameSubnet(iface("eth0", "10.0.1.2", true, 24), a));
  EXPECT_TRUE(sameSubnet(iface("eth0", "10.0.1.2", true, 16), a));
  EXPECT_TRUE(sameSubnet(iface("eth0", "10.0.0.130", true, 25), a));
  EXPECT_FALSE(sameSubnet(iface("eth0", "10.0.0.2", true, 25), a));
  EXPECT_FALSE(sameSubnet(iface("eth0", "fd00::2", true, 64), a));
  net::SockAddr b;
  ASSERT_EQ(net::parseHostPort("[fd00::99]:1", &b), ncclSuccess);
  EXPECT_TRUE(sameSubnet(iface("eth0", "fd00::2", true, 64), b));
  EXPECT_FALSE(sameSubnet(iface("eth0", "fd01::2", true, 64), b));
}

TEST(ListInterfaces, FindsTheRunningIpv4Loopback) {
  bool found = false;
  for (const NetIf& nif : listInterfaces()) {
    if (nif.name == "lo" && nif.addr.family() == AF_INET) {
      found = true;
      EXPECT_TRUE(nif.running);
      EXPECT_EQ(nif.prefixLen, 8);
      EXPECT_EQ(nif.addr.str(), "127.0.0.1:0");
    }
    EXPECT_NE(nif.addr.str(), "[::1]:0");  // IPv6 loopback is never a candidate
  }
  EXPECT_TRUE(found);
}

TEST(SelectInterfaces, HonoursNcclSocketIfnameFromTheEnvironment) {
  setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  std::vector<NetIf> out;
  std::string reason;
  ncclResult_t res = selectInterfaces(&out, 1, &reason);
  unsetenv("NCCL_SOCKET_IFNAME");
  ASSERT_EQ(res, ncclSuccess);
  EXPECT_EQ(namesOf(out), Names{"lo"});
  EXPECT_EQ(reason, "NCCL_SOCKET_IFNAME==lo matched lo");
}

TEST(HostIdentity, NcclHostidOverridesTheDefault) {
  std::string natural = hostIdentity();
  uint64_t naturalHash = hostHash();
  setenv("NCCL_HOSTID", "my-host", 1);
  std::string overridden = hostIdentity();
  uint64_t overriddenHash = hostHash();
  unsetenv("NCCL_HOSTID");
  EXPECT_EQ(overridden, "my-host");
  EXPECT_NE(overriddenHash, naturalHash);
  EXPECT_EQ(hostIdentity(), natural);
}

TEST(HostIdentity, DefaultIsBootIdAndNetworkNamespace) {
  std::string id = hostIdentity();
  size_t colon = id.rfind(':');
  ASSERT_NE(colon, std::string::npos) << id;
  EXPECT_EQ(colon, 36u) << id;  // a boot id is a 36-character UUID
  EXPECT_GT(std::stoull(id.substr(colon + 1)), 0u);
  EXPECT_EQ(hostHash(), hostHash());
}

// Two pods with eth0 and hpn0: "^hpn" admits lo, which getifaddrs lists first. NCCL takes it;
// when the rendezvous address is not loopback the job spans hosts and lo cannot reach them.
TEST(SelectInterfaces, ExclusionListSkipsLoopbackWhenTheJobSpansHosts) {
  std::vector<NetIf> all{iface("lo", "127.0.0.1", true, 8), iface("eth0", "10.0.0.2"), iface("hpn0", "10.9.0.2")};
  std::vector<NetIf> out;
  std::string reason;
  SelectionInputs multiHost{all, "^hpn", "", "10.0.0.1:2000", true};
  ASSERT_EQ(selectFrom(multiHost, 1, &out, &reason), ncclSuccess);
  EXPECT_EQ(namesOf(out), Names{"eth0"});
  EXPECT_NE(reason.find("skipped loopback lo"), std::string::npos) << reason;
  // On one host (loopback rendezvous) NCCL's choice stands; an include list is never changed.
  EXPECT_EQ(select(all, "^hpn", "", "127.0.0.1:2000", 1), Names{"lo"});
  SelectionInputs included{all, "lo", "", "10.0.0.1:2000", true};
  ASSERT_EQ(selectFrom(included, 1, &out), ncclSuccess);
  EXPECT_EQ(namesOf(out), Names{"lo"});
  // Nothing but loopback left: lo it is.
  SelectionInputs onlyLo{all, "^hpn,eth", "", "10.0.0.1:2000", true};
  ASSERT_EQ(selectFrom(onlyLo, 1, &out), ncclSuccess);
  EXPECT_EQ(namesOf(out), Names{"lo"});
}

TEST(SelectInterfaces, LoopbackAddressesAreRecognised) {
  EXPECT_TRUE(isLoopback(iface("lo", "127.0.0.1").addr));
  EXPECT_TRUE(isLoopback(iface("lo", "127.5.0.1").addr));
  EXPECT_TRUE(isLoopback(iface("lo", "::1").addr));
  EXPECT_TRUE(isLoopback(iface("lo", "::ffff:127.0.0.1").addr));
  EXPECT_FALSE(isLoopback(iface("eth0", "10.0.0.2").addr));
  EXPECT_FALSE(isLoopback(iface("eth0", "fd00::2").addr));
}
