#include "comm/init.h"
#include "comm/kernel_path.h"
#include "transports/shm/shm_board.h"
#include <sys/random.h>
#include <unistd.h>
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <cstdio>
#include <cstring>
#include "base/check.h"
#include "base/param.h"
#include "comm/status_server.h"
#include "topo/hw_topology.h"
#include "topo/ifaces.h"
#include "topo/thread_placement.h"
#include "transports/net/net_transport.h"
#include "transports/shm/shm_transport.h"

namespace accl {
namespace {

uint64_t randomU64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull ^ v;
  return v;
}

// Interfaces the selection rules may offer to the closest-NIC choice.
constexpr int kMaxNicCandidates = 16;

size_t channelBytes(int64_t want) {
  size_t bytes = 64 << 10;
  while (bytes < static_cast<size_t>(want) && bytes < (size_t(1) << 30)) bytes <<= 1;
  return bytes;
}

// The pipelining piece of the ring algorithms (the planner caps it at a quarter of a ring).
constexpr size_t kPieceBytes = 128 << 10;
// Where the network carries every peer, each piece costs a hand-off to a socket helper thread
// and a wait for the peer's piece in each direction, on 2 vCPUs about the time loopback TCP
// takes to move 128 KiB: 512 KiB pieces (NCCL's net step too: 4 MiB buffers in 8 steps) in
// 2 MiB rings measured 1.5-2x the busbw of 128 KiB ones at 16-128 MiB
// (perf/socket_vs_raw.py). Not with shared-memory peers: their rings stay NCCL_BUFFSIZE.
constexpr size_t kNetPieceBytes = 512 << 10;

bool envSet(const char* name) {
  const char* v = envGet(name);
  return v != nullptr && *v != '\0';
}

// After the per-peer transport choice: ring capacity and piece size of this communicator.
void sizePipeline(Comm* c, bool allNet) {
  if (allNet && !envSet("NCCL_BUFFSIZE")) c->ringBytes = std::max(c->ringBytes, channelBytes(4 * kNetPieceBytes));
  const int64_t chunk = param::chunkSize();
  c->pieceBytes = chunk >= 0 ? static_cast<size_t>(chunk) : allNet ? kNetPieceBytes : kPieceBytes;
}

// Hosts from the exchanged host identities; the rings follow them (topo/rank_layout.h).
void layoutFromPeers(Comm* c) {
  std::vector<uint64_t> hosts(c->nranks);
  for (int r = 0; r < c->nranks; r++) hosts[r] = c->peers[r].hostHash;
  c->layout = topo::layoutRanks(hosts);
  // Ranks per kernel: the busiest kernel, with the most cores any of its ranks may use.
  std::map<uint64_t, std::pair<int, int>> kernels;  // kernel hash -> ranks, cores
  for (const PeerInfo& p : c->peers) {
    auto& k = kernels[p.kernelHash ? p.kernelHash : p.hostHash];
    k.first++;
    k.second = std::max<int>(k.second, p.cores);
  }
  for (const auto& [hash, k] : kernels)
    if (k.first > c->kernelRanks) std::tie(c->kernelRanks, c->kernelCores) = k;
  if (c->rank == 0)
    INFO(kSubsysInit | kSubsysGraph, "ring over %d host(s), %d host crossing(s)%s: %s; up to %d rank(s) share one "
         "kernel's %d core(s)", c->layout.nhosts, c->layout.hostCrossings(), c->layout.inRankOrder ? " (rank order)" : "",
         c->layout.describe().c_str(), c->kernelRanks, c->kernelCores);
}

}  // namespace

ncclResult_t initComm(Comm* c, const ncclUniqueId& id, int nranks, int rank) {
  c->rank = rank;
  c->nranks = nranks;
  NCCLCHECK(parseAlgoPolicy(param::algo(), &c->algoPolicy));
  NCCLCHECK(parseProtoPolicy(param::proto(), &c->protoPolicy));
  c->deterministic.store(param::deterministic() != 0);
  // The interface first: a NCCL_SOCKET_IFNAME that matches nothing fails here, at once,
  // naming the interfaces that exist, rather than later in the rendezvous.
  std::vector<topo::NetIf> ifs;
  std::string why;
  net::SockAddr rendezvous = decodeUniqueId(id).root();
  // Helper threads (sockets, net plugin, status server, host streams) go to the rank's NUMA node.
  const std::string gpuBusId = c->backend->pciBusId(c->cudaDev);
  const topo::ThreadPlacement placement = topo::placeRankThreads(rank, gpuBusId);
  c->helperCpus = placement.cpus;
  c->locality = topo::RankLocality{gpuBusId, placement.numa};
  // Every interface the rules admit, then the one closest to the rank's GPU or NUMA node.
  NCCLCHECK(topo::selectInterfaces(&ifs, kMaxNicCandidates, &why, rendezvous.len != 0 ? &rendezvous : nullptr));
  if (ifs.size() > 1) {
    std::vector<topo::NicCandidate> nics;
    for (const topo::NetIf& nif : ifs) nics.push_back({nif.name, topo::busIdOfInterface(nif.name)});
    const topo::HwTopology* hw = topo::processHwTopology();
    topo::NicPick pick = hw ? topo::chooseClosestNic(*hw, c->locality, nics) : topo::NicPick{0, "no topology"};
    INFO(kSubsysNet | kSubsysInit, "rank %d: NIC %s of %zu candidates: %s", rank, ifs[pick.index].name.c_str(),
         ifs.size(), pick.why.c_str());
    std::swap(ifs[0], ifs[pick.index]);
  }
  INFO(kSubsysNet | kSubsysInit, "rank %d: data interface %s (%s): %s", rank, ifs[0].name.c_str(),
       ifs[0].addr.str().c_str(), why.c_str());
  const std::vector<topo::NetIf> rails =
      topo::railsOf(ifs, 0, static_cast<int>(std::clamp<int64_t>(param::socketRails(), 1, kMaxSocketRails)));
  NCCLCHECK(Bootstrap::init(id, rank, nranks, &c->abortFlag, &c->bootstrap));
  // The transport setup that follows waits for every peer too: it gets ACCL_INIT_TIMEOUT of
  // its own, after which a rank fails naming the peer it waited for.
  c->bootstrap->setDeadline(param::initTimeoutSec(), "the transport setup after the rendezvous");
  c->ringBytes = channelBytes(param::buffSize());

  // The transport list, in order of preference: the first one that can connect a pair of
  // ranks carries it. Device communicators move their data with kernels (mailboxes, or these
  // transports through a proxy: comm/kernel_path.h, comm/staged_path.h).
  c->transports.push_back(std::make_unique<ShmTransport>());
  c->transports.push_back(std::make_unique<NetTransport>());
  const Transport* netTransport = c->transports.back().get();

  c->peers.resize(nranks);
  PeerInfo& me = c->peers[rank];
  me.rank = rank;
  me.pid = getpid();
  me.cudaDev = c->cudaDev;
  me.deviceId = c->backend->deviceId();  // 0: host memory only
  me.hostHash = topo::hostHash();
  me.kernelHash = topo::kernelHash();
  me.cores = topo::usableCores();
  me.commNonce = randomU64();
  NCCLCHECK(statusServerAddress(c->helperCpus, &me.statusAddr));
  std::memset(me.hostname, 0, sizeof(me.hostname));
  gethostname(me.hostname, sizeof(me.hostname) - 1);
  std::memset(me.ifname, 0, sizeof(me.ifname));
  ifs[0].name.copy(me.ifname, sizeof(me.ifname) - 1);
  {
    TransportSetup ctx = c->transportSetup();
    ctx.dataIf = &ifs[0];
    ctx.rails = &rails;
    for (auto& t : c->transports) NCCLCHECK(t->publish(ctx, &me));
  }
  NCCLCHECK(c->bootstrap->allGather(c->peers.data(), sizeof(PeerInfo)));
  c->nonce = c->peers[0].commNonce;

  for (int r = 0; r < nranks; r++)
    if (c->peers[r].hostHash == me.hostHash) c->localRanks.push_back(r);
  c->localIndex = static_cast<int>(std::find(c->localRanks.begin(), c->localRanks.end(), rank) - c->localRanks.begin());
  layoutFromPeers(c);

  // The per-peer transport table; then every transport sets up its peers (collective, in list
  // order). Lazy transports connect a peer only when a step first uses it (Comm::connection).
  c->conns.resize(nranks);
  c->peerTransport.assign(nranks, nullptr);
  std::vector<std::vector<int>> chosen(c->transports.size());
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    for (size_t t = 0; t < c->transports.size(); t++) {
      if (!c->transports[t]->canConnect(me, c->peers[p])) continue;
      c->peerTransport[p] = c->transports[t].get();
      chosen[t].push_back(p);
      break;
    }
  }
  bool allNet = nranks > 1;
  for (int p = 0; p < nranks; p++)
    if (p != rank) allNet = allNet && c->peerTransport[p] == netTransport;
  sizePipeline(c, allNet);
  std::string used;
  for (size_t t = 0; t < c->transports.size(); t++) {
    TransportSetup ctx = c->transportSetup();
    ctx.dataIf = &ifs[0];
    ctx.rails = &rails;
    NCCLCHECK(c->transports[t]->setup(ctx, chosen[t]));
    if (!chosen[t].empty())
      used += (used.empty() ? "" : "+") + std::string(c->transports[t]->name()) + " (" +
              std::to_string(chosen[t].size()) + " peers)";
  }
  // Collectives as kernels on the caller's stream, where every rank can (comm/kernel_path.h).
  NCCLCHECK(setUpKernelPath(c));
  // ShmDirect's board: only when shared memory reaches every rank (it replaces whole collectives).
  bool allShm = nranks > 1 && param::shmDirectChunk() > 0;
  for (int p = 0; p < nranks; p++)
    if (p != rank) allShm = allShm && c->peerTransport[p] && std::string(c->peerTransport[p]->name()) == "SHM";
  // Making the board is collective, so every rank must agree: with CUDA a rank alone on its
  // device reaches everyone through SHM while the ranks sharing a device also use CUDA IPC.
  if (nranks > 1 && param::shmDirectChunk() > 0) {
    std::vector<uint8_t> votes(nranks, 0);
    votes[rank] = allShm ? 1 : 0;
    NCCLCHECK(c->bootstrap->allGather(votes.data(), 1));
    for (uint8_t v : votes) allShm = allShm && v != 0;
  }
  if (allShm) {
    NCCLCHECK(ShmBoard::create(*c->bootstrap, rank, nranks, c->nonce, static_cast<size_t>(param::shmDirectChunk()),
                               &c->shmBoard));
    if (c->shmBoard) c->shmBoard->fill(&c->board);
  }
  INFO(kSubsysInit, "comm rank %d/%d: %zu local ranks, %s, channel %zu bytes, pieces of %zu bytes", rank, nranks,
       c->localRanks.size(), used.empty() ? "no peers" : used.c_str(), c->ringBytes,
       std::min(c->pieceBytes, c->ringBytes / 4));
  if (std::string dump = param::topoDumpFile(); !dump.empty() && rank == 0) {
    static std::once_flag dumped;  // once per process, as NCCL
    std::call_once(dumped, [&] { topo::dumpHwTopology(dump); });
  }
  c->bootstrap->setDeadline(0, "");
  statusRegister(c);
  return ncclSuccess;
}

}  // namespace accl
