#include "core/init.h"
#include <sys/random.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include "core/check.h"
#include "core/param.h"
#include "topo/ifaces.h"
#include "transports/shm/shm_transport.h"
#include "transports/socket/socket_transport.h"

namespace accl {
namespace {

// First bytes of every data connection: who is calling, for which communicator.
struct DataHandshake {
  uint64_t magic;
  uint64_t nonce;
  int32_t rank;
  int32_t pad;
};

uint64_t randomU64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull ^ v;
  return v;
}

size_t channelBytes() {
  int64_t want = param::buffSize();
  size_t bytes = 64 << 10;
  while (bytes < static_cast<size_t>(want) && bytes < (size_t(1) << 30)) bytes <<= 1;
  return bytes;
}

ncclResult_t connectSockets(Comm* c, const std::vector<int>& peersNeedingSocket, net::Socket& listener) {
  std::string desc;
  // Lower rank connects, higher rank accepts: connect() completes in the kernel backlog, so
  // doing all connects first and then all accepts cannot deadlock.
  int toAccept = 0;
  for (int p : peersNeedingSocket) {
    if (p < c->rank) {
      toAccept++;
      continue;
    }
    net::Socket s;
    NCCLCHECK(net::connectTo(c->peers[p].dataAddr, &s, &c->abortFlag));
    DataHandshake hs{c->bootstrap->magic(), c->nonce, c->rank, 0};
    desc = "rank " + std::to_string(p) + " (" + c->peers[p].dataAddr.str() + ")";
    NCCLCHECK(net::sendAll(s, &hs, sizeof(hs), desc.c_str(), &c->abortFlag, 30000));
    net::tuneForBulk(s);
    c->conns[p] = makeSocketConnection(std::move(s), c->ringBytes, p);
  }
  while (toAccept > 0) {
    net::Socket s;
    NCCLCHECK(net::acceptOne(listener, &s, 120000, &c->abortFlag));
    DataHandshake hs{};
    if (net::recvAll(s, &hs, sizeof(hs), "incoming data connection", &c->abortFlag, 5000) != ncclSuccess ||
        hs.magic != c->bootstrap->magic() || hs.nonce != c->nonce || hs.rank < 0 || hs.rank >= c->rank ||
        c->conns[hs.rank]) {
      WARN("rank %d: dropped a data connection with a wrong handshake (stray or foreign process)", c->rank);
      continue;
    }
    net::tuneForBulk(s);
    c->conns[hs.rank] = makeSocketConnection(std::move(s), c->ringBytes, hs.rank);
    toAccept--;
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t initComm(Comm* c, const ncclUniqueId& id, int nranks, int rank) {
  c->rank = rank;
  c->nranks = nranks;
  NCCLCHECK(parseAlgoPolicy(param::algo(), &c->algoPolicy));
  NCCLCHECK(Bootstrap::init(id, rank, nranks, &c->abortFlag, &c->bootstrap));
  c->ringBytes = channelBytes();

  // A data listener on the selected interface, for peers on other hosts.
  std::vector<topo::NetIf> ifs;
  NCCLCHECK(topo::selectInterfaces(&ifs, 1));
  net::Socket listener;
  net::SockAddr bound;
  NCCLCHECK(net::listenOn(ifs[0].addr, &listener, &bound));

  c->peers.resize(nranks);
  PeerInfo& me = c->peers[rank];
  me.rank = rank;
  me.pid = getpid();
  me.cudaDev = c->cudaDev;
  me.hostHash = topo::hostHash();
  me.commNonce = randomU64();
  me.dataAddr = bound;
  NCCLCHECK(c->bootstrap->allGather(c->peers.data(), sizeof(PeerInfo)));
  c->nonce = c->peers[0].commNonce;

  for (int r = 0; r < nranks; r++)
    if (c->peers[r].hostHash == me.hostHash) c->localRanks.push_back(r);
  c->localIndex = static_cast<int>(std::find(c->localRanks.begin(), c->localRanks.end(), rank) - c->localRanks.begin());
  const bool useShm = param::shmDisable() == 0 && c->localRanks.size() > 1;

  if (useShm) {
    char name[64];
    snprintf(name, sizeof(name), "/accl-%016llx-%08llx", static_cast<unsigned long long>(c->nonce),
             static_cast<unsigned long long>(me.hostHash & 0xffffffffu));
    NCCLCHECK(ShmDomain::create(name, c->localIndex, c->localRankCount(), c->ringBytes, &c->shm));
  }
  NCCLCHECK(c->bootstrap->barrier());  // every segment exists
  if (useShm) NCCLCHECK(c->shm->attachPeers());
  NCCLCHECK(c->bootstrap->barrier());  // every segment is mapped by every peer
  if (useShm) c->shm->unlinkOwn();

  c->conns.resize(nranks);
  std::vector<int> socketPeers;
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    auto local = std::find(c->localRanks.begin(), c->localRanks.end(), p);
    if (useShm && local != c->localRanks.end()) {
      c->conns[p] = c->shm->connect(static_cast<int>(local - c->localRanks.begin()), p);
      c->anyShm = true;
    } else {
      socketPeers.push_back(p);
    }
  }
  if (!socketPeers.empty()) {
    NCCLCHECK(connectSockets(c, socketPeers, listener));
    c->anySocket = true;
  }
  INFO(kSubsysInit, "comm rank %d/%d: %zu local ranks, %s%s, channel %zu bytes", rank, nranks, c->localRanks.size(),
       c->anyShm ? "shm" : "", c->anySocket ? (c->anyShm ? "+socket" : "socket") : "", c->ringBytes);
  return ncclSuccess;
}

}  // namespace accl
