// ifaces.h: which IP interface ACCL uses (bootstrap and sockets), and host identity.
// NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY exactly as NCCL defines them; when unset, an
// up `hpn*` interface with an address wins (the HPN rule), then NCCL's default order.
#pragma once
#include <string>
#include <vector>
#include "nccl.h"
#include "net/socket.h"

namespace accl::topo {

struct NetIf {
  std::string name;
  net::SockAddr addr;  // port 0
  bool running = false;  // IFF_UP and IFF_RUNNING
  int prefixLen = 0;     // netmask length, for NCCL_COMM_ID subnet matching
};

// Every interface with an IPv4/IPv6 address (IPv6 loopback excluded), in getifaddrs order,
// one entry per (interface, family): the first address of each family.
std::vector<NetIf> listInterfaces();

// Parsed NCCL_SOCKET_IFNAME-style list: [^][=]item[,item]*.
struct IfnameSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> items;  // ":port" suffixes stripped
};
IfnameSpec parseIfnameSpec(const std::string& text);
bool matchesSpec(const IfnameSpec& spec, const std::string& ifname);

// Selects up to maxIfs interfaces for the current environment. `reason` (optional) receives
// a one-line explanation ("NCCL_SOCKET_IFNAME=eth0 matched eth0", "hpn0 preferred: ...").
// No match -> ncclInvalidUsage with a WARN listing the interfaces that exist.
// `rendezvous` (optional): the root address of the communicator's unique id; when it is not
// loopback (or, without it, NCCL_COMM_ID is set and not loopback) the job spans hosts.
ncclResult_t selectInterfaces(std::vector<NetIf>* out, int maxIfs, std::string* reason = nullptr,
                              const net::SockAddr* rendezvous = nullptr);

// The same rules applied to an explicit interface list and explicit settings (what
// selectInterfaces reads from getifaddrs and the environment), so they can be tested.
struct SelectionInputs {
  std::vector<NetIf> interfaces;  // as listInterfaces() returns them
  std::string ifname;             // NCCL_SOCKET_IFNAME
  std::string family;             // NCCL_SOCKET_FAMILY
  std::string commId;             // NCCL_COMM_ID
  // The rendezvous is not on loopback, so ranks may be on other hosts: an exclusion list
  // ("^hpn") then never selects a loopback interface while another one is usable.
  bool spansHosts = false;
};
ncclResult_t selectFrom(const SelectionInputs& in, int maxIfs, std::vector<NetIf>* out,
                        std::string* reason = nullptr);

// True if `addr` lies in the IP subnet of `nif` (same family, same prefixLen leading bits).
bool sameSubnet(const NetIf& nif, const net::SockAddr& addr);
// 127.0.0.0/8, ::1 or an IPv4-mapped loopback address.
bool isLoopback(const net::SockAddr& addr);

// The interface bootstrap listens on: with NCCL_COMM_ID set, the running interface on that
// address's subnet (as NCCL does; none -> ncclSystemError); else selectInterfaces(.., 1, ..).
ncclResult_t selectBootstrapInterface(NetIf* out, std::string* reason = nullptr);

// The rails of the chosen interface admitted[chosen]: every admitted interface of the same
// network (same name stem, "hpn" for hpn0/hpn1; same family; not loopback), at most maxRails,
// in name order so that rail r is the same plane on every host. Rails should be on distinct
// subnets (or policy routing), so that the route to a peer's rail leaves through our own.
// One rail (the chosen interface) when maxRails <= 1 or nothing else matches.
std::vector<NetIf> railsOf(const std::vector<NetIf>& admitted, size_t chosen, int maxRails);
std::string interfaceStem(const std::string& name);  // "hpn1" -> "hpn"

// Host identity: NCCL_HOSTID if set, else boot id + network namespace inode. Ranks with equal
// identity share memory; different network namespaces count as different hosts (pods).
std::string hostIdentity();
uint64_t hostHash();  // stable 64-bit hash of hostIdentity()
// Which ranks share an operating-system kernel, hence its cores: the boot id alone (pods on
// one node, netns pods of one machine). 0 when the boot id cannot be read.
uint64_t kernelHash();
// The CPUs this process may run on (its affinity mask), at least 1.
int usableCores();

}  // namespace accl::topo
