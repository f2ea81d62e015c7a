#include "sched/stream_claims.h"
#include <algorithm>
#include <mutex>
#include "base/log.h"

namespace accl {
namespace {

std::mutex gMu;
std::vector<StreamClaim*> gLive;  // pending claims of this process

struct Held {
  std::shared_ptr<StreamClaim> claim;
  std::function<bool()> done;
};
std::mutex gHeldMu;
std::vector<Held> gHeld;  // claims of launched kernels, until their streams have run them

void releaseFinishedHeld() {
  std::vector<Held> finished;
  {
    std::lock_guard<std::mutex> lk(gHeldMu);
    auto keep = std::stable_partition(gHeld.begin(), gHeld.end(), [](const Held& h) { return !h.done(); });
    finished.assign(std::make_move_iterator(keep), std::make_move_iterator(gHeld.end()));
    gHeld.erase(keep, gHeld.end());
  }
  for (Held& h : finished) h.claim->release();
}

// CU_STREAM_PER_THREAD (cudaStreamPerThread): each thread's own default stream.
bool perThread(cudaStream_t s) { return reinterpret_cast<uintptr_t>(s) == 2; }

bool hasMember(const std::vector<StreamClaim::Member>& v, uint64_t nonce, int rank) {
  return std::any_of(v.begin(), v.end(), [&](const StreamClaim::Member& m) { return m.nonce == nonce && m.rank == rank; });
}

}  // namespace

StreamClaim::StreamClaim(const void* domain, cudaStream_t stream, std::vector<Member> members)
    : domain_(domain), stream_(stream), thread_(std::this_thread::get_id()), members_(std::move(members)) {}

StreamClaim::~StreamClaim() { release(); }

void StreamClaim::release() {
  std::lock_guard<std::mutex> lk(gMu);
  if (!live_) return;
  live_ = false;
  gLive.erase(std::find(gLive.begin(), gLive.end(), this));
}

std::shared_ptr<StreamClaim> findClaim(const std::vector<std::shared_ptr<StreamClaim>>& claims, const void* domain,
                                       cudaStream_t stream) {
  for (const auto& c : claims)
    if (c->domain() == domain && c->stream() == stream) return c;
  return nullptr;
}

void holdClaimUntil(std::shared_ptr<StreamClaim> claim, std::function<bool()> done) {
  std::lock_guard<std::mutex> lk(gHeldMu);
  gHeld.push_back({std::move(claim), std::move(done)});
}

ncclResult_t claimDeviceStreams(const std::vector<std::unique_ptr<OpDesc>>& ops,
                                std::vector<std::shared_ptr<StreamClaim>>* out) {
  releaseFinishedHeld();
  struct Want {
    const void* domain;
    cudaStream_t stream;
    std::vector<StreamClaim::Member> members;
  };
  std::vector<Want> wants;
  for (const auto& op : ops) {
    // Single-rank communicators wait for nobody; host streams are not device streams.
    if (op->stream.kind != dev::StreamKind::Device || op->comm->nranks < 2) continue;
    const void* domain = op->comm->backend->streamDomain();
    auto it = std::find_if(wants.begin(), wants.end(),
                           [&](const Want& w) { return w.domain == domain && w.stream == op->stream.handle; });
    if (it == wants.end()) {
      wants.push_back({domain, op->stream.handle, {}});
      it = wants.end() - 1;
    }
    if (!hasMember(it->members, op->comm->nonce, op->comm->rank)) it->members.push_back({op->comm->nonce, op->comm->rank});
  }
  if (wants.empty()) return ncclSuccess;
  std::lock_guard<std::mutex> lk(gMu);
  for (const Want& w : wants)
    for (const StreamClaim* pending : gLive) {
      if (pending->domain_ != w.domain || pending->stream_ != w.stream) continue;
      if (perThread(w.stream) && pending->thread_ != std::this_thread::get_id()) continue;
      for (const StreamClaim::Member& m : w.members) {
        auto other = std::find_if(pending->members_.begin(), pending->members_.end(), [&](const StreamClaim::Member& p) {
          return p.nonce == m.nonce && p.rank != m.rank;
        });
        if (other == pending->members_.end() || hasMember(pending->members_, m.nonce, m.rank)) continue;
        WARN("rank %d: cannot queue this call on stream %p: rank %d of the same communicator (%llx) has a collective "
             "queued on that stream that is still waiting for rank %d, and the stream runs its work in order, so "
             "both would wait forever. Use one stream per rank (or drive both ranks from one thread inside "
             "ncclGroupStart/End)",
             m.rank, static_cast<void*>(w.stream), other->rank, static_cast<unsigned long long>(m.nonce), m.rank);
        return ncclInvalidUsage;
      }
    }
  for (Want& w : wants) {
    auto c = std::make_shared<StreamClaim>(w.domain, w.stream, std::move(w.members));
    c->live_ = true;
    gLive.push_back(c.get());
    out->push_back(std::move(c));
  }
  return ncclSuccess;
}

}  // namespace accl
