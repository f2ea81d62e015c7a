#include "comm/staged_path.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "comm/comm.h"
#include "comm/init.h"
#include "device.h"
#include "device/deferred_release.h"

namespace accl {
namespace {

// The host communicator of the same ranks, made inside this one's init: a fresh rendezvous
// whose id rank 0 makes and the others learn through this communicator's bootstrap.
ncclResult_t makeShadow(Comm* c, ncclComm_t* out) {
  std::vector<ncclUniqueId> ids(c->nranks);
  if (c->rank == 0) {
    char label[kUniqueIdLabelBytes];
    snprintf(label, sizeof(label), "staged path of comm %016llx (%d ranks)", static_cast<unsigned long long>(c->nonce),
             c->nranks);
    NCCLCHECK(bootstrapNewUniqueId(&ids[0], label));
  }
  NCCLCHECK(c->bootstrap->allGather(ids.data(), sizeof(ncclUniqueId)));
  auto impl = std::make_shared<Comm>();
  impl->config = c->config;
  impl->config.blocking = 1;
  impl->backend = dev::hostBackend();
  impl->cudaDev = -1;
  impl->rank = c->rank;
  impl->nranks = c->nranks;
  impl->initState.store(ncclInProgress);
  ncclResult_t r = initComm(impl.get(), ids[0], c->nranks, c->rank);
  if (impl->cudaDev < 0) impl->cudaDev = impl->localIndex;
  impl->initState.store(r);
  if (r != ncclSuccess) {
    impl->closeTransports();
    return r;
  }
  auto* h = new ncclComm;
  h->impl = std::move(impl);
  registerComm(h);
  *out = h;
  return ncclSuccess;
}

// Issues one op's share of a round on the shadow (inside the proxy's group).
ncclResult_t issue(const StagedOp& op, char* in, char* out, size_t count, ncclRedOp_t red, ncclComm_t comm) {
  using K = StagedOp::Kind;
  switch (op.kind) {
    case K::AllReduce: return ncclAllReduce(in, out, count, op.type, red, comm, nullptr);
    case K::Broadcast: return ncclBroadcast(in ? in : out, out, count, op.type, op.root, comm, nullptr);
    case K::Reduce: return ncclReduce(in, out ? out : in, count, op.type, red, op.root, comm, nullptr);
    case K::AllGather: return ncclAllGather(in, out, count, op.type, comm, nullptr);
    case K::ReduceScatter: return ncclReduceScatter(in, out, count, op.type, red, comm, nullptr);
    case K::AlltoAll: return ncclAlltoAll(in, out, count, op.type, comm, nullptr);
    case K::Gather: return ncclGather(in, out ? out : in, count, op.type, op.root, comm, nullptr);
    case K::Scatter: return ncclScatter(in ? in : out, out, count, op.type, op.root, comm, nullptr);
    case K::Send: return ncclSend(in, count, op.type, op.root, comm, nullptr);
    case K::Recv: return ncclRecv(out, count, op.type, op.root, comm, nullptr);
  }
  return ncclInternalError;
}

}  // namespace

ncclResult_t StagedPath::setUp(Comm* c, std::shared_ptr<StagedPath>* out) {
  auto sp = std::make_shared<StagedPath>();
  sp->c_ = c;
  sp->backend_ = c->backend;
  sp->rank_ = c->rank;
  sp->nranks_ = c->nranks;
  void* wordDev = nullptr;
  void* boxDev = nullptr;
  ncclResult_t mine = c->backend->allocMapped((1 + kern::kReportWords) * sizeof(uint64_t), &sp->abortWord_, &wordDev);
  if (mine == ncclSuccess)
    mine = c->backend->allocMapped(kern::kStagedHeaderBytes + kern::kStagedDataBytes, &sp->box_, &boxDev);
  // Every rank learns whether every rank has its box before anyone makes the shadow.
  std::vector<int32_t> oks(c->nranks, 0);
  oks[c->rank] = mine == ncclSuccess ? 1 : 0;
  NCCLCHECK(c->bootstrap->allGather(oks.data(), sizeof(int32_t)));
  for (int r = 0; r < c->nranks; r++)
    if (!oks[r]) {
      WARN("rank %d: rank %d could not allocate its staging box (%zu bytes of mapped host memory), which this "
           "communicator of %d ranks needs for its collectives",
           c->rank, r, kern::kStagedHeaderBytes + kern::kStagedDataBytes, c->nranks);
      return ncclSystemError;
    }
  sp->abortHost_ = reinterpret_cast<uint64_t*>(sp->abortWord_.get());
  sp->abortDevice_ = static_cast<const uint64_t*>(wordDev);
  sp->boxDevice_ = static_cast<char*>(boxDev);
  sp->header_ = reinterpret_cast<kern::StagedBoxHeader*>(sp->box_.get());
  INFO(kSubsysInit, "rank %d/%d: collectives run as staged kernels on the caller's stream: more ranks than the "
       "collective kernel's %d, so each call's data crosses through a %zu-byte pinned staging box and a host "
       "communicator of the same ranks (made now) runs the collective on it",
       c->rank, c->nranks, kern::kMailboxRanks, kern::kStagedDataBytes);
  NCCLCHECK(makeShadow(c, &sp->shadow_));
  StagedPath* self = sp.get();
  sp->proxy_ = std::thread([self] { self->run(); });
  *out = std::move(sp);
  return ncclSuccess;
}

StagedPath::~StagedPath() {
  stop_ = true;
  if (proxy_.joinable()) proxy_.join();
  const bool failed = c_ && (c_->asyncError.load() != ncclSuccess || c_->abortFlag.load());
  if (shadow_) {
    if (failed) ncclCommAbort(shadow_);
    else ncclCommDestroy(shadow_);
  }
  if (failed || !order_.lastDone(*backend_, std::chrono::milliseconds(0))) {
    // A kernel may still read the box or poll the word: they go once the device lets them go.
    auto box = std::make_shared<dev::Buffer>(std::move(box_));
    char* p = abortWord_.get();
    auto word = std::make_shared<dev::Buffer>(std::move(abortWord_));
    if (p) dev::releaseLater(backend_, dev::Buffer(p, [box, word](char*) mutable {
                               box.reset();
                               word.reset();
                             }));
  }
}

size_t StagedPath::roundBytesFor(size_t piecesPerRound, size_t elemSize) const {
  const size_t each = kern::kStagedDataBytes / std::max<size_t>(piecesPerRound, 1);
  // A multiple of 64 bytes where that leaves something (vector copies), else of the element.
  size_t bytes = each >= 64 ? each / 64 * 64 : each;
  bytes = std::min<size_t>(bytes / elemSize * elemSize, 0x7fffffffu);
  return bytes;
}

size_t StagedPath::p2pRoundBytes() const {
  // A power of two (every element size divides it) that leaves room for a send and a receive
  // per peer and a few more, whatever the group holds: both sides of a pair must cut alike.
  const size_t ops = 2 * static_cast<size_t>(nranks_) + 8;
  size_t b = 1;
  while (b * 2 * ops <= kern::kStagedDataBytes) b *= 2;
  return b;
}

int StagedPath::maxP2pOps() const {
  return static_cast<int>(std::min<size_t>(kern::kStagedSegments, kern::kStagedDataBytes / p2pRoundBytes()));
}

void StagedPath::addCall(StagedCall call, kern::StagedArgs* a) {
  std::memset(a, 0, sizeof(*a));
  a->box = boxDevice_;
  a->abortFlag = abortDevice_;
  a->report = const_cast<uint64_t*>(abortDevice_) + 1;
  a->timeoutNs = static_cast<uint64_t>(std::max<int64_t>(0, param::timeoutSec())) * 1000000000ull;
  a->rank = static_cast<uint32_t>(rank_);
  a->rounds = call.rounds;
  a->nseg = static_cast<uint32_t>(call.segs.size());
  std::copy(call.segs.begin(), call.segs.end(), a->seg);
  std::lock_guard<std::mutex> lk(mu_);
  a->call = nextCall_++;
  calls_.emplace(a->call, std::move(call));
}

void StagedPath::markLaunched(dev::Backend& backend, const dev::StreamRef& s, bool capturing) {
  order_.markLaunched(backend, s, capturing);
  wakes_.fetch_add(1);
}

void StagedPath::stopKernels() {
  if (abortHost_) __atomic_store_n(abortHost_, 1, __ATOMIC_SEQ_CST);
  // The shadow's calls in progress end too (they wait for peers that this failure may have cut off).
  std::shared_ptr<Comm> shadow;
  if (shadow_ && lookupComm(shadow_, "staged path", &shadow) == ncclSuccess) shadow->fail(ncclRemoteError);
}

ncclResult_t StagedPath::checkKernels(Comm& c) {
  const uint64_t* report = abortHost_ ? abortHost_ + 1 : nullptr;
  if (!report || __atomic_load_n(&report[kern::kReportCode], __ATOMIC_ACQUIRE) == 0) return ncclSuccess;
  std::lock_guard<std::mutex> lk(mu_);
  if (!reported_) {
    reported_ = true;
    WARN("rank %d: ACCL_TIMEOUT=%lld s expired in a staged collective kernel: it waited for round %llu of its call to "
         "be run by the rank's staged proxy, which waits for the other ranks' share of the same call (a rank that "
         "has not launched it, or is blocked in something that waits for the whole device, never sends it). The "
         "results of that call are not valid; the communicator has failed",
         c.rank, static_cast<long long>(param::timeoutSec()),
         static_cast<unsigned long long>(report[kern::kReportChunk]));
  }
  c.fail(ncclRemoteError);
  return ncclRemoteError;
}

void StagedPath::finish(Comm& c) {
  const int64_t t = param::timeoutSec();
  const auto limit = std::chrono::seconds(t > 0 ? t : 30);
  if (c.asyncError.load() != ncclSuccess || c.abortFlag.load()) return;
  if (!order_.lastDone(*backend_, limit))
    WARN("rank %d: ncclCommDestroy: this rank's last staged collective kernel has not finished after %lld s; its "
         "proxy stops, and peers still waiting for its data will fail",
         rank_, static_cast<long long>(limit.count()));
}

void StagedPath::run() {
  uint64_t handled = __atomic_load_n(&header_->done, __ATOMIC_ACQUIRE);
  uint64_t seenWakes = wakes_.load();
  auto lastWork = std::chrono::steady_clock::now();
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint64_t posted = __atomic_load_n(&header_->posted, __ATOMIC_ACQUIRE);
    if (posted == handled) {
      // Spin a while after work (the next round or call is usually close), then nap.
      const uint64_t w = wakes_.load();
      if (w != seenWakes) {
        seenWakes = w;
        lastWork = std::chrono::steady_clock::now();
      }
      if (std::chrono::steady_clock::now() - lastWork > std::chrono::milliseconds(2))
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      else
        std::this_thread::yield();
      continue;
    }
    const uint64_t call = __atomic_load_n(&header_->call, __ATOMIC_ACQUIRE);
    const uint64_t round = __atomic_load_n(&header_->round, __ATOMIC_ACQUIRE);
    ncclResult_t r = __atomic_load_n(&header_->failed, __ATOMIC_ACQUIRE) ? ncclRemoteError : runRound(call, round);
    if (r != ncclSuccess) {
      __atomic_store_n(&header_->failed, 1, __ATOMIC_RELEASE);
      c_->fail(r);
    }
    handled = posted;
    __atomic_store_n(&header_->done, posted, __ATOMIC_RELEASE);
    lastWork = std::chrono::steady_clock::now();
  }
}

ncclResult_t StagedPath::runRound(uint64_t callNo, uint64_t round) {
  const StagedCall* call = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = calls_.find(callNo);
    if (it != calls_.end()) call = &it->second;  // a map's node stays put while others come and go
  }
  if (call == nullptr || round >= call->rounds) {
    WARN("rank %d: the staged kernel posted round %llu of call %llu, which the staged proxy does not know (internal "
         "error)",
         rank_, static_cast<unsigned long long>(round), static_cast<unsigned long long>(callNo));
    return ncclInternalError;
  }
  char* data = box_.get() + kern::kStagedHeaderBytes;
  std::vector<size_t> off(call->segs.size());
  size_t at = 0;
  for (size_t i = 0; i < call->segs.size(); i++) {
    off[i] = at;
    at += kern::stagedRoundPart(call->segs[i], round) * call->segs[i].blocks;
  }
  std::vector<ncclRedOp_t> made;
  ncclResult_t first = ncclGroupStart();
  for (const StagedOp& op : call->ops) {
    const kern::StagedSegment& seg = call->segs[op.inSeg >= 0 ? op.inSeg : op.outSeg];
    const uint64_t part = kern::stagedRoundPart(seg, round);
    if (part == 0) continue;
    ncclRedOp_t red = op.op;
    if (op.preMul) {
      const void* scalar = op.deviceScalar ? static_cast<const void*>(header_->scalar) : op.scalar;
      ncclResult_t r = ncclRedOpCreatePreMulSum(&red, const_cast<void*>(scalar), op.type, ncclScalarHostImmediate, shadow_);
      if (r != ncclSuccess) {
        first = first != ncclSuccess ? first : r;
        continue;
      }
      made.push_back(red);
    }
    char* in = op.inSeg >= 0 ? data + off[op.inSeg] : nullptr;
    char* out = op.outSeg >= 0 ? data + off[op.outSeg] : nullptr;
    ncclResult_t r = issue(op, in, out, part / dev::typeSize(op.type), red, shadow_);
    if (first == ncclSuccess) first = r;
  }
  ncclResult_t r = ncclGroupEnd();
  if (first == ncclSuccess) first = r;
  for (ncclRedOp_t red : made) ncclRedOpDestroy(red, shadow_);
  if (round + 1 == call->rounds && !call->captured) {
    std::lock_guard<std::mutex> lk(mu_);
    calls_.erase(callNo);
  }
  return first;
}

}  // namespace accl
