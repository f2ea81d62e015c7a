// peer_info.h: what every rank publishes to every other at init (one fixed-size record per
// rank, all-gathered through the bootstrap). Transports decide from two of these whether they
// can connect a pair of ranks, so anything a transport needs to decide goes here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "net/socket.h"

namespace accl {

constexpr int kMaxSocketRails = 4;  // interfaces of one network a socket connection stripes over

struct PeerInfo {
  int rank;
  int pid;
  int cudaDev;
  uint64_t hostHash;   // equal hash: same host (and network namespace), so shared memory works
  uint64_t kernelHash;  // equal hash: same OS kernel (boot id), so the same cores (topo::kernelHash)
  int32_t cores;        // CPUs this rank's process may run on (topo::usableCores)
  uint64_t commNonce;  // rank 0's value names this communicator's shm segments
  net::SockAddr dataAddr;
  char hostname[64];  // for error messages naming an unreachable peer
  char ifname[16];    // the interface dataAddr belongs to (IFNAMSIZ)
  net::SockAddr statusAddr;  // this process's status server (hang summaries)
  // Shared memory: the anonymous segment (memfd) peers on this host map through
  // /proc/<pid>/fd/<shmFd>; -1 if none. pidNs tells whether that path names this process.
  int32_t shmFd;
  uint64_t pidNs;
  // Which device this rank drives, by a stable id (its backend's: a hash of the PCI bus id;
  // 0 = host memory only): ranks of one device share it, whatever process they are in.
  uint64_t deviceId;
  // Socket rails (topo::railsOf: hpn0, hpn1, ...): a data listener on each, in name order;
  // rail r of one rank connects to rail r of another. dataAddr is one of them.
  int32_t nrails;
  net::SockAddr railAddr[kMaxSocketRails];
  char railIfname[kMaxSocketRails][16];
};

// "rank 3 (host pod1, 10.77.2.2:41000, interface hpn0)", for error messages.
std::string describePeer(const std::vector<PeerInfo>& peers, int peer);

}  // namespace accl
