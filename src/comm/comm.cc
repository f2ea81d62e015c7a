#include "comm/comm.h"
#include "transports/shm/shm_board.h"
#include <cstring>
#include <unordered_set>
#include "base/check.h"
#include "base/log.h"
#include "comm/kernel_path.h"
#include "comm/staged_path.h"
#include "comm/status_server.h"

namespace accl {
namespace {

std::mutex gLiveMu;
std::unordered_set<ncclComm_t>& liveComms() {
  static std::unordered_set<ncclComm_t> s;
  return s;
}

}  // namespace

Comm::Comm() = default;

Comm::~Comm() {
  kernelPath.reset();  // first: its peer watcher may call fail(), which walks what follows
  stagedPath.reset();  // its proxy may call fail() too
  statusUnregister(this);
  conns.clear();  // before the transports whose memory and threads they use
  transports.clear();
  shmBoard.reset();
}

Doorbell* Comm::bell() {
  for (auto& t : transports)
    if (Doorbell* b = t->sharedBell()) return b;
  return &ownBell;
}

ncclResult_t Comm::connectPeer(int peer, PeerConnection** out) {
  if (peer < 0 || peer >= nranks || peer == rank || !peerTransport[peer]) {
    WARN("rank %d: no transport can connect to %s", rank, describePeer(peer).c_str());
    return ncclInternalError;
  }
  if (asyncError.load() != ncclSuccess) return static_cast<ncclResult_t>(asyncError.load());
  std::unique_ptr<PeerConnection> made;
  TransportSetup ctx = transportSetup();
  NCCLCHECK(peerTransport[peer]->connect(ctx, peer, &made));
  INFO(kSubsysInit, "rank %d: connected to %s via %s", rank, describePeer(peer).c_str(), peerTransport[peer]->name());
  std::lock_guard<std::mutex> lk(connMu);
  conns[peer] = std::move(made);
  // A failure may have closed the others while this one was being made: close it too.
  if (asyncError.load() != ncclSuccess) conns[peer]->close(-1);
  *out = conns[peer].get();
  return ncclSuccess;
}

void Comm::fail(ncclResult_t err, int culprit) {
  int expected = ncclSuccess;
  if (asyncError.compare_exchange_strong(expected, err)) {
    // Why it fails, as first said: about the rank it blames, what this rank was told first
    // within the past 2 s (consequences, such as a neighbour that failed in turn, come after it
    // and name other ranks); with no one to blame, the newest WARN of this rank (e.g. "every
    // rail (hpn0, hpn1) is lost", or a timeout's report naming whom it waited for). The WARN
    // below repeats it, so the process's last error (ncclGetLastError(NULL)) says it too.
    std::string first;
    if (!abortFlag.load()) first = culprit >= 0 ? firstRecentWarnFor(rank, 2000, culprit) : latestRecentWarnFor(rank, 2000);
    const std::string because = first.empty() ? std::string() : " (" + first + ")";
    if (abortFlag.load()) {
      // This rank's own ncclCommAbort closed the connections: no peer is to blame, and the
      // WARN that says the abort interrupted the call stays the last error.
      culprit = -1;
      INFO(kSubsysInit, "rank %d of %d: communicator failed after ncclCommAbort on this rank", rank, nranks);
    } else if (culprit >= 0) {
      WARN("rank %d of %d: lost peer %s; communicator failed with \"%s\"%s; closing its connections so the other "
           "ranks stop waiting",
           rank, nranks, describePeer(culprit).c_str(), pncclGetErrorString(err), because.c_str());
    } else {
      WARN("rank %d of %d: communicator failed with \"%s\"%s; closing its connections so peers stop waiting", rank,
           nranks, pncclGetErrorString(err), because.c_str());
    }
    {
      std::lock_guard<std::mutex> g(causeMu);
      cause = first.empty() ? std::string(lastErrorText()) : first;
    }
    // The ring notice (naming the culprit) goes first, so a neighbour that sees our data
    // connections close can already read whom to blame.
    if (kernelPath) kernelPath->stopKernels();
    if (stagedPath) stagedPath->stopKernels();
    if (bootstrap) bootstrap->closeRing(culprit);
    board.depart(rank, Board::kBoardFailed);  // board peers waiting for our post, connected or not
    std::lock_guard<std::mutex> lk(connMu);
    for (auto& c : conns)
      if (c) c->close(culprit);
    ringDoorbell(bell());
  }
}

std::string Comm::failureCause() const {
  std::lock_guard<std::mutex> g(causeMu);
  return cause;
}

TransportSetup Comm::transportSetup() {
  TransportSetup t;
  t.rank = rank;
  t.nranks = nranks;
  t.nonce = nonce;
  t.bootstrap = bootstrap.get();
  t.peers = &peers;
  t.abortFlag = &abortFlag;
  t.ringBytes = ringBytes;
  t.bell = bell();
  t.conns = &conns;
  t.netName = config.netName;
  t.helperCpus = &helperCpus;
  t.locality = &locality;
  return t;
}

void Comm::closeTransports(bool leaving) {
  if (kernelPath) kernelPath->stopKernels();
  if (stagedPath) stagedPath->stopKernels();
  const bool announce = leaving && asyncError.load() == ncclSuccess;  // a failed comm named its culprit already
  if (announce) {
    if (bootstrap) bootstrap->closeRing(rank);
    board.depart(rank, Board::kBoardAborted);
  }
  std::unique_lock<std::mutex> lk(connMu);
  for (auto& c : conns)
    if (c) c->close(announce ? rank : -1);
  lk.unlock();
  if (bootstrap) bootstrap->abort();
  ringDoorbell(bell());
}

void Comm::depart() {
  std::lock_guard<std::mutex> lk(connMu);
  for (auto& t : transports) t->depart();
  board.depart(rank);
  for (auto& c : conns)
    if (c) c->depart(rank);
}

void registerComm(ncclComm_t handle) {
  std::lock_guard<std::mutex> lk(gLiveMu);
  liveComms().insert(handle);
}

void unregisterComm(ncclComm_t handle) {
  std::lock_guard<std::mutex> lk(gLiveMu);
  liveComms().erase(handle);
}

bool findLiveComm(ncclComm_t handle, std::shared_ptr<Comm>* out) {
  std::lock_guard<std::mutex> lk(gLiveMu);
  if (handle == nullptr || liveComms().count(handle) == 0) return false;
  *out = handle->impl;
  return true;
}

bool peerRankInThisProcess(const Comm& c) {
  std::lock_guard<std::mutex> lk(gLiveMu);
  for (ncclComm_t h : liveComms())
    if (h->impl && h->impl.get() != &c && h->impl->nonce == c.nonce) return true;
  return false;
}

ncclResult_t lookupComm(ncclComm_t handle, const char* fn, std::shared_ptr<Comm>* out) {
  if (handle == nullptr) {
    WARN("%s: comm argument is NULL", fn);
    return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lk(gLiveMu);
  if (liveComms().count(handle) == 0) {
    WARN("%s: comm %p is not a live communicator (already destroyed or aborted, or never initialized)", fn,
         static_cast<void*>(handle));
    return ncclInvalidUsage;
  }
  *out = handle->impl;
  return ncclSuccess;
}

}  // namespace accl
