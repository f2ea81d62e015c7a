// bootstrap_init.cc: Bootstrap::init, the rendezvous. Each rank opens a listener, tells the
// root where it is, receives every rank's address, and connects its ring (rank -> rank+1).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <mutex>
#include <set>
#include "bootstrap/bootstrap_impl.h"
#include "bootstrap/root.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "topo/ifaces.h"

namespace accl {

namespace {

// How long a rank waits for its ring predecessor, which got the table at the same moment.
constexpr int kRingConnectTimeoutMs = 120 * 1000;
// How long rank 0 retries binding a fixed NCCL_COMM_ID port that is still held.
constexpr int kRootBindRetryMs = 5000;

std::string hostOnly(const net::SockAddr& addr) {
  std::string s = addr.str();
  size_t colon = s.rfind(':');
  s.resize(colon == std::string::npos ? s.size() : colon);
  if (s.size() >= 2 && s.front() == '[') s = s.substr(1, s.size() - 2);
  return s;
}

// Connects to the root. The root of an id from ncclGetUniqueId listens from the moment the id
// exists until its one rendezvous is complete, so a refusal means it is gone: fail at once
// with the likely cause instead of retrying for a minute. (An NCCL_COMM_ID root is started by
// rank 0 during init, so there a refusal is retried as NCCL does.)
// ACCL_INIT_TIMEOUT: when this rank's rendezvous must be over (time_point::max(): never).
using InitClock = std::chrono::steady_clock;
InitClock::time_point initDeadline() {
  static const int64_t sec = param::initTimeoutSec();
  return sec > 0 ? InitClock::now() + std::chrono::seconds(sec) : InitClock::time_point::max();
}
// Milliseconds left until `deadline` (-1: no limit), at least 1 while not past it.
int msLeft(InitClock::time_point deadline) {
  if (deadline == InitClock::time_point::max()) return -1;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - InitClock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, INT32_MAX));
}
bool pastDeadline(InitClock::time_point deadline) {
  return deadline != InitClock::time_point::max() && msLeft(deadline) == 0;
}

// Connects within the init deadline (NCCL's retry rules otherwise).
ncclResult_t connectUntil(Bootstrap::Impl& b, const net::SockAddr& addr, net::Socket* sock,
                          InitClock::time_point deadline, const char* who) {
  if (deadline == InitClock::time_point::max()) return net::connectTo(addr, sock, b.abortFlag);
  std::string why;
  const auto start = InitClock::now();
  ncclResult_t res = net::connectWithin(addr, sock, std::max(1, msLeft(deadline)), &why, b.abortFlag);
  // The real time spent: a refused address can end the retries long before the deadline.
  const double waitedSec = std::chrono::duration<double>(InitClock::now() - start).count();
  if (res != ncclSuccess && res != ncclInternalError)
    WARN("Bootstrap: rank %d of %d: could not connect to %s at %s: gave up after %.1f s (ACCL_INIT_TIMEOUT=%lld s) "
         "(%s): is that address right and reachable from this host (the unique id or NCCL_COMM_ID names it)?",
         b.rank, b.nranks, who, addr.str().c_str(), waitedSec, static_cast<long long>(param::initTimeoutSec()),
         why.c_str());
  return res;
}

// The ids (their random magic) this process has joined a rendezvous with: the evidence that a
// refused root is an id used a second time, rather than a root that exited or a wrong address.
std::mutex gJoinedMu;
std::set<uint64_t>& joinedIds() {
  static std::set<uint64_t>* ids = new std::set<uint64_t>();  // never destroyed (atexit order)
  return *ids;
}
bool joinedBefore(uint64_t magic) {
  std::lock_guard<std::mutex> lk(gJoinedMu);
  return joinedIds().count(magic) != 0;
}
void rememberJoined(uint64_t magic) {
  std::lock_guard<std::mutex> lk(gJoinedMu);
  if (joinedIds().size() < 4096) joinedIds().insert(magic);
}

// The message for an id this process already joined with (usedBefore: evidence, not a guess).
void warnReusedId(const Bootstrap::Impl& b, const net::SockAddr& root, const char* what) {
  WARN("Bootstrap: rank %d of %d: the bootstrap root %s of this unique id ('%s') %s, and this process already joined "
       "a communicator with this same id: an id from ncclGetUniqueId serves exactly one communicator (its root stops "
       "listening once that one is made); make a new id for each ncclCommInitRank",
       b.rank, b.nranks, root.str().c_str(), b.label, what);
}

ncclResult_t connectRoot(Bootstrap::Impl& b, const net::SockAddr& root, net::Socket* sock,
                         InitClock::time_point deadline, bool usedBefore) {
  if (b.magic == kCommIdMagic) return connectUntil(b, root, sock, deadline, "the bootstrap root (NCCL_COMM_ID)");
  std::string why;
  ncclResult_t res = net::connectWithin(root, sock, static_cast<int>(param::socketConnectTimeoutMsec()), &why,
                                        b.abortFlag, /*retryRefused=*/false);
  if (res == ncclSuccess) rememberJoined(b.magic);
  if (res == ncclSuccess || res == ncclInternalError) return res;
  if (why == strerror(ECONNREFUSED)) {
    if (usedBefore) {
      warnReusedId(b, root, "refused the connection");
    } else {
      WARN("Bootstrap: rank %d of %d: the bootstrap root %s of this unique id ('%s') refused the connection: "
           "nothing listens there. The process that made the id (ncclGetUniqueId) must stay alive until every "
           "rank has joined, and an id serves one communicator only; check that this process got the id meant "
           "for this communicator, intact",
           b.rank, b.nranks, root.str().c_str(), b.label);
    }
    return ncclInvalidUsage;
  }
  return connectUntil(b, root, sock, deadline, "the bootstrap root of this unique id");  // slow or unreachable
}

// Joins the rendezvous: Hello to the root, then the table of all listeners.
ncclResult_t rendezvous(Bootstrap::Impl& b, const net::SockAddr& root, const net::SockAddr& myAddr,
                        InitClock::time_point deadline) {
  net::Socket sock;
  const bool usedBefore = b.magic != kCommIdMagic && joinedBefore(b.magic);
  NCCLCHECK(connectRoot(b, root, &sock, deadline, usedBefore));
  std::string rootDesc = "bootstrap root " + root.str();
  boot::Hello hello;
  std::memset(static_cast<void*>(&hello), 0, sizeof(hello));  // padding included: the MAC covers every byte sent
  hello.magic = b.magic;
  hello.rank = b.rank;
  hello.nranks = b.nranks;
  hello.listenAddr = myAddr;
  static_assert(sizeof(hello.label) == kUniqueIdLabelBytes);
  std::memcpy(hello.label, b.label, sizeof(hello.label));
  if (!boot::randomBytes(hello.nonce, sizeof(hello.nonce))) {
    WARN("Bootstrap: rank %d: getrandom failed for the hello nonce: %s", b.rank, strerror(errno));
    return ncclSystemError;
  }
  const boot::Digest job = boot::jobKey();
  boot::signHello(&hello, job);
  NCCLCHECK(net::sendAll(sock, &hello, sizeof(hello), rootDesc.c_str(), b.abortFlag));
  boot::RootReply reply{};
  // The root answers once every rank has joined: the wait a missing or refused rank prolongs.
  ncclResult_t res = net::recvAll(sock, &reply, sizeof(reply), rootDesc.c_str(), b.abortFlag, msLeft(deadline));
  if (res != ncclSuccess && pastDeadline(deadline)) {
    WARN("Bootstrap: rank %d of %d: waited ACCL_INIT_TIMEOUT=%lld s for the bootstrap root %s ('%s') to answer, "
         "which it does once all %d ranks have joined: a rank never called init with this id (not started, "
         "crashed, or a different id), or the root refused one (its log says why: wrong rank, id or nranks); "
         "failing the init",
         b.rank, b.nranks, static_cast<long long>(param::initTimeoutSec()), root.str().c_str(), b.label, b.nranks);
    return ncclRemoteError;
  }
  if (res != ncclSuccess && usedBefore) {
    // The root was still closing down after the one rendezvous it serves: the same cause.
    warnReusedId(b, root, "closed the connection without an answer");
    return ncclInvalidUsage;
  }
  NCCLCHECK(res);
  std::string bad = boot::decodeRootReply(&reply, sizeof(reply), &reply);
  if (!bad.empty()) {
    WARN("Bootstrap: rank %d of %d: %s sent a corrupt reply: %s", b.rank, b.nranks, rootDesc.c_str(), bad.c_str());
    return ncclRemoteError;
  }
  if (reply.status != ncclSuccess) {
    boot::waitForFailureAnswers(2000);
    WARN("Bootstrap: rank %d of %d: rendezvous failed: %s", b.rank, b.nranks, reply.message);
    return static_cast<ncclResult_t>(reply.status);
  }
  b.connKey = boot::connectionKey(job, reply.sessionKey);
  std::vector<net::SockAddr> raw(b.nranks);
  NCCLCHECK(net::recvAll(sock, raw.data(), raw.size() * sizeof(net::SockAddr), rootDesc.c_str(), b.abortFlag,
                         msLeft(deadline)));
  bad = boot::decodeAddressTable(raw.data(), raw.size() * sizeof(net::SockAddr), b.nranks, &b.table);
  if (!bad.empty()) {
    WARN("Bootstrap: rank %d of %d: %s sent a corrupt table: %s", b.rank, b.nranks, rootDesc.c_str(), bad.c_str());
    return ncclRemoteError;
  }
  return ncclSuccess;
}

ncclResult_t connectRing(Bootstrap::Impl& b, InitClock::time_point deadline) {
  NCCLCHECK(connectUntil(b, b.table[b.next()], &b.ringNext, deadline, b.desc(b.next())));
  boot::Handshake hs;
  NCCLCHECK(b.handshakeTo(b.next(), boot::Purpose::Ring, &hs));
  NCCLCHECK(net::sendAll(b.ringNext, &hs, sizeof(hs), b.desc(b.next()), b.abortFlag));
  const int left = msLeft(deadline);
  const int waitMs = left >= 0 ? std::min(left, kRingConnectTimeoutMs) : kRingConnectTimeoutMs;
  ncclResult_t res = b.waitForConnection(b.prev(), boot::Purpose::Ring, waitMs);
  if (res == ncclRemoteError && !b.ringPrev.valid()) {
    WARN("Bootstrap: rank %d: ring predecessor %s did not connect within %d s%s", b.rank, b.desc(b.prev()),
         waitMs / 1000, waitMs < kRingConnectTimeoutMs ? " (ACCL_INIT_TIMEOUT)" : "");
  }
  return res;
}

ncclResult_t initImpl(Bootstrap::Impl& b, const ncclUniqueId& id) {
  UniqueIdContents contents;
  net::SockAddr root;
  std::string bad = boot::decodeUniqueIdBytes(&id, sizeof(id), &contents, &root);
  if (!bad.empty()) {
    WARN("Bootstrap: invalid %s", bad.c_str());
    return ncclInvalidArgument;
  }
  b.magic = contents.magic;
  contents.label[sizeof(contents.label) - 1] = '\0';
  std::memcpy(b.label, contents.label, sizeof(b.label));
  if (contents.magic == kCommIdMagic && b.rank == 0) {
    // NCCL_COMM_ID: no process ran a root in ncclGetUniqueId; rank 0 serves it.
    net::Socket rootListener;
    if (net::listenOn(root, &rootListener, nullptr, 1024, kRootBindRetryMs) != ncclSuccess) {
      WARN("Bootstrap: rank 0 cannot serve NCCL_COMM_ID=%s: another process holds that address. Either two "
           "processes were started as rank 0 of this job (check the launcher's rank assignment), or another job "
           "or service uses the port: give each job its own NCCL_COMM_ID port",
           root.str().c_str());
      return ncclInvalidUsage;
    }
    INFO(kSubsysBootstrap | kSubsysInit, "Bootstrap root listening on %s (NCCL_COMM_ID)", root.str().c_str());
    boot::startRootThread(std::move(rootListener), b.magic, b.label);
  }

  topo::NetIf nif;
  std::string reason;
  NCCLCHECK(topo::selectBootstrapInterface(&nif, &reason));
  INFO(kSubsysBootstrap | kSubsysInit, "Bootstrap: using %s %s; why: %s", nif.name.c_str(),
       hostOnly(nif.addr).c_str(), reason.c_str());
  net::SockAddr myAddr;
  NCCLCHECK(net::listenOn(nif.addr, &b.listener, &myAddr));
  b.acceptor.emplace(b.listener, b.magic, sizeof(boot::Handshake), "Bootstrap rank " + std::to_string(b.rank));

  const InitClock::time_point deadline = initDeadline();
  NCCLCHECK(rendezvous(b, root, myAddr, deadline));
  for (int r = 0; r < b.nranks; ++r) b.peerDesc.push_back("rank " + std::to_string(r) + " (" + b.table[r].str() + ")");
  if (b.nranks > 1) NCCLCHECK(connectRing(b, deadline));
  INFO(kSubsysBootstrap, "Bootstrap: rank %d of %d connected (listening on %s)", b.rank, b.nranks,
       myAddr.str().c_str());
  return ncclSuccess;
}

}  // namespace

ncclResult_t Bootstrap::init(const ncclUniqueId& id, int rank, int nranks, const std::atomic<int>* abortFlag,
                             std::unique_ptr<Bootstrap>* out) {
  if (nranks <= 0 || rank < 0 || rank >= nranks) {
    WARN("Bootstrap: invalid rank %d of nranks %d", rank, nranks);
    return ncclInvalidArgument;
  }
  auto impl = std::make_unique<Impl>();
  impl->rank = rank;
  impl->nranks = nranks;
  impl->abortFlag = abortFlag ? abortFlag : &impl->ownAbort;
  ncclResult_t res = initImpl(*impl, id);
  if (res != ncclSuccess) return res;
  out->reset(new Bootstrap(std::move(impl)));
  return ncclSuccess;
}

}  // namespace accl
