// select_interfaces.cc: which interfaces ACCL uses. NCCL_SOCKET_IFNAME as NCCL applies it;
// when unset, ACCL's HPN rule first, then NCCL's default order (first step with a match wins).
#include <arpa/inet.h>
#include <netdb.h>
#include <algorithm>
#include <cstring>
#include <functional>
#include "base/log.h"
#include "base/param.h"
#include "topo/ifaces.h"

namespace accl::topo {

namespace {

std::string hostText(const net::SockAddr& addr) {
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr.ss), addr.len, host, sizeof(host), nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return "?";
  }
  return host;
}

// "eth0 (10.0.0.2, fd00::2), lo (127.0.0.1)": what exists, for error messages.
std::string describePresent(const std::vector<NetIf>& all) {
  std::vector<std::pair<std::string, std::string>> byName;
  for (const NetIf& nif : all) {
    std::string what = hostText(nif.addr) + (nif.running ? "" : " down");
    auto it = std::find_if(byName.begin(), byName.end(), [&](const auto& e) { return e.first == nif.name; });
    if (it == byName.end()) byName.emplace_back(nif.name, what);
    else it->second += ", " + what;
  }
  if (byName.empty()) return "none";
  std::string text;
  for (const auto& [name, what] : byName) text += (text.empty() ? "" : ", ") + name + " (" + what + ")";
  return text;
}

std::string describeChosen(const std::vector<NetIf>& chosen) {
  std::string text;
  for (const NetIf& nif : chosen) text += (text.empty() ? "" : ",") + nif.name;
  return text;
}

int familyFromText(const std::string& family) {
  if (family == "AF_INET") return AF_INET;
  if (family == "AF_INET6") return AF_INET6;
  return -1;  // NCCL: any other value means either family
}

// Running interfaces of the wanted family that pass `keep`, each name once (first address).
std::vector<NetIf> pick(const SelectionInputs& in, int maxIfs, const std::function<bool(const NetIf&)>& keep) {
  int family = familyFromText(in.family);
  std::vector<NetIf> chosen;
  for (const NetIf& nif : in.interfaces) {
    if (static_cast<int>(chosen.size()) >= maxIfs) break;
    if (!nif.running) continue;
    if (family != -1 && nif.addr.family() != family) continue;
    bool taken = false;
    for (const NetIf& c : chosen) taken |= c.name == nif.name;
    if (taken || !keep(nif)) continue;
    chosen.push_back(nif);
  }
  return chosen;
}

std::function<bool(const NetIf&)> bySpec(const std::string& text) {
  return [spec = parseIfnameSpec(text)](const NetIf& nif) { return matchesSpec(spec, nif.name); };
}

}  // namespace

bool sameSubnet(const NetIf& nif, const net::SockAddr& addr) {
  if (nif.addr.family() != addr.family()) return false;
  const unsigned char* a;
  const unsigned char* b;
  int maxBits;
  if (addr.family() == AF_INET) {
    a = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(&nif.addr.ss)->sin_addr);
    b = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(&addr.ss)->sin_addr);
    maxBits = 32;
  } else if (addr.family() == AF_INET6) {
    auto* local = reinterpret_cast<const sockaddr_in6*>(&nif.addr.ss);
    auto* remote = reinterpret_cast<const sockaddr_in6*>(&addr.ss);
    // A link-local address given with %scope names its interface.
    if (remote->sin6_scope_id != 0 && local->sin6_scope_id != remote->sin6_scope_id) return false;
    a = reinterpret_cast<const unsigned char*>(&local->sin6_addr);
    b = reinterpret_cast<const unsigned char*>(&remote->sin6_addr);
    maxBits = 128;
  } else {
    return false;
  }
  int bits = std::min(nif.prefixLen, maxBits);
  for (int i = 0; i < bits / 8; ++i) {
    if (a[i] != b[i]) return false;
  }
  if (bits % 8 != 0) {
    unsigned char mask = static_cast<unsigned char>(0xff << (8 - bits % 8));
    if ((a[bits / 8] & mask) != (b[bits / 8] & mask)) return false;
  }
  return true;
}

ncclResult_t selectFrom(const SelectionInputs& in, int maxIfs, std::vector<NetIf>* out, std::string* reason) {
  std::string why;
  std::vector<NetIf> chosen;
  // NCCL counts a value of one character or less as unset.
  if (in.ifname.size() > 1) {
    chosen = pick(in, maxIfs, bySpec(in.ifname));
    std::string skipped;
    if (in.spansHosts && parseIfnameSpec(in.ifname).exclude) {
      // NCCL would take lo here ("^hpn" admits it), which cannot reach another host.
      auto notLoopback = [keep = bySpec(in.ifname)](const NetIf& nif) { return keep(nif) && !isLoopback(nif.addr); };
      std::vector<NetIf> remote = pick(in, maxIfs, notLoopback);
      if (!remote.empty() && describeChosen(remote) != describeChosen(chosen)) {
        skipped = describeChosen(chosen);
        chosen = std::move(remote);
      }
    }
    if (!skipped.empty()) {
      INFO(kSubsysNet | kSubsysInit,
           "NCCL_SOCKET_IFNAME=%s: skipped %s (loopback) because the job spans hosts (the rendezvous address is "
           "not loopback); using %s instead",
           in.ifname.c_str(), skipped.c_str(), describeChosen(chosen).c_str());
    }
    if (chosen.empty()) {
      WARN("NCCL_SOCKET_IFNAME=%s matches no usable interface; interfaces present: %s", in.ifname.c_str(),
           describePresent(in.interfaces).c_str());
      return ncclInvalidUsage;
    }
    why = "NCCL_SOCKET_IFNAME=" + in.ifname + " matched " + describeChosen(chosen);
    if (!skipped.empty()) why += " (skipped loopback " + skipped + ": the job spans hosts)";
  } else {
    struct Step {
      std::function<bool(const NetIf&)> keep;
      std::string why;
    };
    std::vector<Step> steps;
    steps.push_back({bySpec("hpn"), "preferred by the HPN rule: an hpn* interface is up with an address"});
    steps.push_back({bySpec("ib"), "NCCL default order: ib* first"});
    net::SockAddr commAddr;
    if (in.commId.size() > 1 && net::parseHostPort(in.commId.c_str(), &commAddr) == ncclSuccess) {
      steps.push_back({[commAddr](const NetIf& nif) { return sameSubnet(nif, commAddr); },
                       "NCCL default order: on the subnet of NCCL_COMM_ID=" + in.commId});
    }
    steps.push_back({bySpec("^docker,lo,virbr"), "NCCL default order: not docker*, lo*, virbr*"});
    steps.push_back({bySpec("docker"), "NCCL default order: only docker* left"});
    steps.push_back({bySpec("lo"), "NCCL default order: only lo* left"});
    steps.push_back({bySpec("virbr"), "NCCL default order: only virbr* left"});
    for (const Step& step : steps) {
      chosen = pick(in, maxIfs, step.keep);
      if (!chosen.empty()) {
        why = describeChosen(chosen) + " (" + step.why + ")";
        break;
      }
    }
    if (chosen.empty()) {
      WARN("No usable network interface%s%s; interfaces present: %s",
           in.family.empty() ? "" : " with NCCL_SOCKET_FAMILY=", in.family.c_str(),
           describePresent(in.interfaces).c_str());
      return ncclInvalidUsage;
    }
  }
  if (reason) *reason = why;
  *out = std::move(chosen);
  return ncclSuccess;
}

bool isLoopback(const net::SockAddr& addr) {
  if (addr.family() == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&addr.ss)->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr.family() == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&addr.ss)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
  }
  return false;
}

ncclResult_t selectInterfaces(std::vector<NetIf>* out, int maxIfs, std::string* reason,
                              const net::SockAddr* rendezvous) {
  SelectionInputs in{listInterfaces(), param::socketIfname(), param::socketFamily(), param::commId()};
  net::SockAddr commAddr;
  if (rendezvous != nullptr) {
    in.spansHosts = !isLoopback(*rendezvous);
  } else if (in.commId.size() > 1 && net::parseHostPort(in.commId.c_str(), &commAddr) == ncclSuccess) {
    in.spansHosts = !isLoopback(commAddr);
  }
  return selectFrom(in, maxIfs, out, reason);
}

ncclResult_t selectBootstrapInterface(NetIf* out, std::string* reason) {
  std::string commId = param::commId();
  if (commId.size() <= 1) {
    std::vector<NetIf> chosen;
    ncclResult_t res = selectInterfaces(&chosen, 1, reason);
    if (res != ncclSuccess) return res;
    *out = chosen.front();
    return ncclSuccess;
  }
  net::SockAddr root;
  ncclResult_t res = net::parseHostPort(commId.c_str(), &root);
  if (res != ncclSuccess) return res;
  std::vector<NetIf> all = listInterfaces();
  for (const NetIf& nif : all) {
    if (nif.running && sameSubnet(nif, root)) {
      *out = nif;
      if (reason) *reason = nif.name + " is on the subnet of NCCL_COMM_ID=" + commId;
      return ncclSuccess;
    }
  }
  WARN("No usable listening interface on the subnet of NCCL_COMM_ID=%s; interfaces present: %s",
       commId.c_str(), describePresent(all).c_str());
  return ncclSystemError;
}

}  // namespace accl::topo
