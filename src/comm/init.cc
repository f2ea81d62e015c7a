#include "comm/init.h"
#include <sys/random.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include "base/check.h"
#include "base/param.h"
#include "comm/status_server.h"
#include "net/socket_connect.h"
#include "topo/ifaces.h"
#include "transports/net/net_select.h"
#include "transports/shm/shm_transport.h"
#include "transports/socket/socket_transport.h"

namespace accl {
namespace {

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

SocketPeer describeSocketPeer(const Comm* c, int p) {
  const PeerInfo& info = c->peers[p];
  return SocketPeer{c->rank, p, info.hostname, info.dataAddr.str(), c->peers[c->rank].ifname};
}

ncclResult_t connectSocketPeers(Comm* c, const std::vector<int>& peers, const net::Socket& listener) {
  const PeerInfo& me = c->peers[c->rank];
  net::MeshSelf self{c->rank, c->bootstrap->magic(), c->nonce, me.hostname, me.ifname, me.dataAddr};
  std::vector<net::MeshPeer> mesh;
  for (int p : peers) mesh.push_back(net::MeshPeer{p, c->peers[p].dataAddr, describeSocketPeer(c, p).describe()});
  const SocketLayout layout = socketLayout();
  return net::connectPeers(self, mesh, layout.nsocks(), listener, &c->abortFlag,
                           [&](int p, std::vector<net::Socket> socks) {
                             c->conns[p] = makeSocketConnection(std::move(socks), c->ringBytes, layout, c->bell(),
                                                                describeSocketPeer(c, p));
                           });
}

}  // namespace

ncclResult_t initComm(Comm* c, const ncclUniqueId& id, int nranks, int rank) {
  c->rank = rank;
  c->nranks = nranks;
  NCCLCHECK(parseAlgoPolicy(param::algo(), &c->algoPolicy));
  c->deterministic.store(param::deterministic() != 0);
  // The interface first: a NCCL_SOCKET_IFNAME that matches nothing fails here, at once,
  // naming the interfaces that exist, rather than later in the rendezvous.
  std::vector<topo::NetIf> ifs;
  std::string why;
  NCCLCHECK(topo::selectInterfaces(&ifs, 1, &why));
  INFO(kSubsysNet | kSubsysInit, "rank %d: data interface %s (%s): %s", rank, ifs[0].name.c_str(),
       ifs[0].addr.str().c_str(), why.c_str());
  NCCLCHECK(Bootstrap::init(id, rank, nranks, &c->abortFlag, &c->bootstrap));
  c->ringBytes = channelBytes();

  // A data listener on the selected interface's address only, for peers on other hosts.
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
  NCCLCHECK(statusServerAddress(&me.statusAddr));
  std::memset(me.hostname, 0, sizeof(me.hostname));
  gethostname(me.hostname, sizeof(me.hostname) - 1);
  std::memset(me.ifname, 0, sizeof(me.ifname));
  ifs[0].name.copy(me.ifname, sizeof(me.ifname) - 1);
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
    net::NetChoice choice;
    NCCLCHECK(net::chooseNetModule(c->config.netName, &choice));
    INFO(kSubsysInit | kSubsysNet, "rank %d: NET/%s: %s", rank, choice.module ? choice.module->name() : "Socket",
         choice.why.c_str());
    if (choice.module) NCCLCHECK(net::connectNetPeers(c->transportSetup(), choice, socketPeers, &c->netState));
    else NCCLCHECK(connectSocketPeers(c, socketPeers, listener));
    c->anySocket = true;
  }
  INFO(kSubsysInit, "comm rank %d/%d: %zu local ranks, %s%s, channel %zu bytes", rank, nranks, c->localRanks.size(),
       c->anyShm ? "shm" : "", c->anySocket ? (c->anyShm ? "+socket" : "socket") : "", c->ringBytes);
  statusRegister(c);
  return ncclSuccess;
}

}  // namespace accl
