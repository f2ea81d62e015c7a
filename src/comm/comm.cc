#include "comm/comm.h"
#include <cstring>
#include <unordered_set>
#include "base/log.h"
#include "comm/status_server.h"
#include "transports/net/net_select.h"
#include "transports/shm/shm_transport.h"

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
  statusUnregister(this);
  conns.clear();  // before the shm segments they point into
  netState.reset();  // after the connections that use its context
  shm.reset();
}

Doorbell* Comm::bell() { return shm ? shm->bell() : &privateBell; }

void Comm::fail(ncclResult_t err, int culprit) {
  int expected = ncclSuccess;
  if (asyncError.compare_exchange_strong(expected, err)) {
    if (culprit >= 0) {
      WARN("rank %d of %d: lost peer %s; communicator failed with \"%s\"; closing its connections so the other "
           "ranks stop waiting",
           rank, nranks, describePeer(culprit).c_str(), pncclGetErrorString(err));
    } else {
      WARN("rank %d of %d: communicator failed with \"%s\"; closing its connections so peers stop waiting", rank,
           nranks, pncclGetErrorString(err));
    }
    // The ring notice (naming the culprit) goes first, so a neighbour that sees our data
    // connections close can already read whom to blame.
    if (bootstrap) bootstrap->closeRing(culprit);
    for (auto& c : conns)
      if (c) c->close(culprit);
    ringDoorbell(bell());
  }
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
  return t;
}

void Comm::closeTransports() {
  for (auto& c : conns)
    if (c) c->close(-1);
  if (bootstrap) bootstrap->abort();
  ringDoorbell(bell());
}

void Comm::depart() {
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
