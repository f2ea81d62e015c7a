// accl-info: what ACCL sees of this node's network, and what it would do with the current
// environment. Lists interfaces, the one ACCL would pick and why, the interface to use for a
// pod of N accelerators, and (--peers) whether other hosts answer on a TCP port.
//   accl-info [--pod-size N] [--peers host[:port] ...] [--port P] [--timeout-ms T]
//   accl-info --hang-report    (how to read ACCL's hang report)
//   accl-info --topo [xml]     (packages, NUMA nodes, GPUs, NICs and which NIC is closest)
#include "hang_report_help.h"
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "base/log.h"
#include "base/param.h"
#include "topo/hw_topology.h"
#include "topo/ifaces.h"
#include "topo/reachability.h"

namespace {

// "10.0.0.1" rather than "10.0.0.1:0": interfaces have addresses, not ports.
std::string addressOnly(const accl::net::SockAddr& addr) {
  std::string text = addr.str();
  return text.substr(0, text.rfind(':'));
}

constexpr int kWholeNode = 16;  // accelerators in a full node: the scale-out (hpn) network pays off

void listInterfaces(const std::vector<accl::topo::NetIf>& all) {
  std::printf("Interfaces:\n");
  for (const auto& nif : all) {
    std::printf("  %-12s %-40s %s\n", nif.name.c_str(), (addressOnly(nif.addr) + "/" + std::to_string(nif.prefixLen)).c_str(),
                nif.running ? "up" : "DOWN");
  }
}

void showSelection() {
  std::printf("\nEnvironment: NCCL_SOCKET_IFNAME=%s NCCL_SOCKET_FAMILY=%s NCCL_COMM_ID=%s\n",
              accl::param::socketIfname().empty() ? "(unset)" : accl::param::socketIfname().c_str(),
              accl::param::socketFamily().empty() ? "(unset)" : accl::param::socketFamily().c_str(),
              accl::param::commId().empty() ? "(unset)" : accl::param::commId().c_str());
  std::vector<accl::topo::NetIf> chosen;
  std::string why;
  if (accl::topo::selectInterfaces(&chosen, 1, &why) != ncclSuccess) {
    std::printf("ACCL would pick: nothing -- init would fail with ncclInvalidUsage:\n  %s\n", accl::lastErrorText());
  } else {
    std::printf("ACCL would pick: %s %s\n  why: %s\n", chosen[0].name.c_str(), addressOnly(chosen[0].addr).c_str(), why.c_str());
  }
  accl::topo::NetIf boot;
  std::string bootWhy;
  if (accl::topo::selectBootstrapInterface(&boot, &bootWhy) == ncclSuccess) {
    std::printf("Bootstrap (rendezvous) interface: %s %s\n  why: %s\n", boot.name.c_str(), addressOnly(boot.addr).c_str(),
                bootWhy.c_str());
  }
}

void recommend(const std::vector<accl::topo::NetIf>& all, int podSize) {
  bool hpnUp = false;
  for (const auto& nif : all) hpnUp |= nif.name.rfind("hpn", 0) == 0 && nif.running;
  std::printf("\nRecommendation for a pod of %d accelerator(s) on this node:\n", podSize);
  if (podSize < kWholeNode) {
    std::printf("  use eth0 (NCCL_SOCKET_IFNAME==eth0): a partial node shares the host network; the hpn\n"
                "  scale-out network is reserved for whole-node (%d-accelerator) pods.\n", kWholeNode);
  } else if (hpnUp) {
    std::printf("  whole node: hpn0 is present and up -> use it (the default when NCCL_SOCKET_IFNAME is unset).\n");
  } else {
    std::printf("  WARNING: whole node but no hpn* interface is up: traffic would fall back to eth0 at a fraction\n"
                "  of the scale-out bandwidth. Check that the pod was given the hpn network.\n");
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: accl-info [--pod-size N] [--peers host[:port] ...] [--port P] [--timeout-ms T]\n"
               "       accl-info --hang-report\n"
               "       accl-info --topo [hwloc XML file]   (default: NCCL_TOPO_FILE, else this machine)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int podSize = kWholeNode;
  int port = 22;
  int timeoutMs = 2000;
  std::vector<std::string> peers;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--pod-size" && i + 1 < argc) podSize = std::atoi(argv[++i]);
    else if (a == "--port" && i + 1 < argc) port = std::atoi(argv[++i]);
    else if (a == "--timeout-ms" && i + 1 < argc) timeoutMs = std::atoi(argv[++i]);
    else if (a == "--topo") {
      std::string xml = i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "";
      accl::topo::HwTopology t;
      if (accl::topo::loadHwTopology(&t, xml) != ncclSuccess) return 1;
      std::fputs(accl::topo::formatHwTopology(t).c_str(), stdout);
      return 0;
    }
    else if (a == "--hang-report") {
      std::fputs(accl::tools::kHangReportHelp, stdout);
      return 0;
    }
    else if (a == "--peers") {
      while (i + 1 < argc && argv[i + 1][0] != '-') peers.push_back(argv[++i]);
    } else if (a == "-h" || a == "--help") return usage();
    else return usage();
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::printf("Host: %s (identity %s)\n", host, accl::topo::hostIdentity().c_str());
  auto all = accl::topo::listInterfaces();
  listInterfaces(all);
  showSelection();
  recommend(all, podSize);
  if (!peers.empty()) {
    std::printf("\nReachability (TCP connect; refused = reachable, no answer = unreachable):\n");
    int unreachable = 0;
    for (const auto& peer : peers) unreachable += accl::topo::checkPeer(peer, port, timeoutMs) ? 0 : 1;
    return unreachable == 0 ? 0 : 1;
  }
  return 0;
}
