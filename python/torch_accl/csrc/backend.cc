#include "backend.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

#include <algorithm>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <cstdint>
#include <exception>

namespace torch_accl {
namespace {
// Whether the loaded library was built with its CUDA backend ("backends: host, cuda").
bool libraryHasCuda() {
  const char* v = api().ncclAcclVersionString();
  const char* b = v ? std::strstr(v, "backends:") : nullptr;
  return b && std::strstr(b, "cuda");
}

// A send nobody waits on is started after this long (launchP2P): long enough that the ops a
// program issues back to back are grouped even on a loaded machine.
constexpr std::chrono::milliseconds kP2PFlushAfter{1000};

int64_t nowTicks() { return std::chrono::steady_clock::now().time_since_epoch().count(); }
}  // namespace

AcclBackend::AcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout), store_(store) {
  // The library's own per-op progress timeout follows the process-group timeout, so an op whose
  // peer never shows up fails inside the library (naming the peer) rather than hanging. The
  // library reads ACCL_TIMEOUT once per process; a user setting wins.
  if (!std::getenv("ACCL_TIMEOUT")) {
    long secs = std::max<long>(1, (long)std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
    setenv("ACCL_TIMEOUT", std::to_string(secs).c_str(), 0);
  }
  // CPU tensors: a host-backend communicator even where the library runs CUDA (a GPU machine).
  comm_ = initComm("accl/unique_id", /*host=*/true);
  check(api().ncclHostStreamCreate(&stream_), "ncclHostStreamCreate");
  p2pComm_ = initComm("accl/unique_id/p2p", /*host=*/true);
  check(api().ncclHostStreamCreate(&p2pStream_), "ncclHostStreamCreate");
  tagComm_ = initComm("accl/unique_id/tag", /*host=*/true);
  check(api().ncclHostStreamCreate(&tagStream_), "ncclHostStreamCreate");
  ledger_ = std::make_unique<SendLedger>(store_, rank, size);
  tagLane_ = std::make_unique<TagLane>(store_, rank, size);
  // CUDA tensors: a communicator on the current device now, while every rank is here (a first
  // send/recv could not create one). Every rank of a job sees the same kind of machine.
  if (cudaDeviceCount() > 0 && libraryHasCuda()) deviceComm(currentCudaDevice(), true, "init_process_group");
  completer_ = std::thread([this] { completionLoop(Lane::Coll); });
  p2pCompleter_ = std::thread([this] { completionLoop(Lane::P2P); });
  tagCompleter_ = std::thread([this] { completionLoop(Lane::Tag); });
  watchdog_ = std::thread([this] { watchdogLoop(); });
}

AcclBackend::~AcclBackend() { shutdown(); }

ncclComm_t AcclBackend::initComm(const std::string& key, bool host) {
  const Api& a = api();
  ncclUniqueId id;
  if (rank_ == 0) {
    check(a.ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof(id));
    store_->set(key, bytes);
  } else {
    std::vector<uint8_t> bytes = store_->get(key);
    TORCH_CHECK(bytes.size() == sizeof(id), "accl: bad unique id in the store (", bytes.size(), " bytes)");
    memcpy(&id, bytes.data(), sizeof(id));
  }
  ncclComm_t comm = nullptr;
  if (host) check(a.ncclCommInitRankHost(&comm, size_, id, rank_), "ncclCommInitRankHost");
  else check(a.ncclCommInitRank(&comm, size_, id, rank_), "ncclCommInitRank");
  return comm;
}

AcclBackend::DeviceComm& AcclBackend::deviceComm(c10::Device device, bool collective, const char* name) {
  auto it = deviceComms_.find(device.index());
  if (it != deviceComms_.end()) return it->second;
  TORCH_CHECK(builtWithCuda(), "accl: ", name, ": tensor on ", device, ", but this torch_accl was built without "
              "CUDA support (see docs/pytorch.md)");
  TORCH_CHECK(libraryHasCuda(), "accl: ", name, ": tensor on ", device, ", but the loaded ACCL library (",
              api().ncclAcclVersionString(), ") has no CUDA backend");
  TORCH_CHECK(collective, "accl: ", name, ": first op of this process group on ", device, " is point-to-point; "
              "its communicator is created by a collective on that device (or init_process_group with that "
              "device current, or device_id=)");
  DeviceComm dc;
  {
    c10::DeviceGuard guard(device);  // ncclCommInitRank binds the current device
    dc.comm = initComm("accl/unique_id/cuda/" + std::to_string(deviceCommsCreated_++));
    dc.stream = std::make_unique<SideStream>(device);
  }
  return deviceComms_.emplace(device.index(), std::move(dc)).first->second;
}

void AcclBackend::eagerConnectSingleDevice(at::Device device) {
  if (!device.is_cuda()) return;
  std::lock_guard<std::mutex> lk(launchMu_);
  deviceComm(device, true, "init_process_group(device_id=...)");
}

void AcclBackend::shutdown() {
  flushP2P();  // a last isend before destroy_process_group still goes out
  {
    std::lock_guard<std::mutex> lk(launchMu_);
    if (tagLane_) {  // receives never matched: they fail rather than hang their waiters
      auto err = std::make_exception_ptr(c10::DistBackendError(
          c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
          c10::str("accl: the process group was shut down before this tagged op was matched on rank ", rank_)));
      for (auto& op : tagLane_->dropAll()) {
        op.work->hostEnqueued();
        op.work->finish(err);
      }
    }
  }
  {
    std::lock_guard<std::mutex> lk(qmu_);
    if (stopping_) return;
    stopping_ = true;
  }
  qcv_.notify_all();
  wdCv_.notify_all();
  if (completer_.joinable()) completer_.join();
  if (p2pCompleter_.joinable()) p2pCompleter_.join();
  if (tagCompleter_.joinable()) tagCompleter_.join();
  if (watchdog_.joinable()) watchdog_.join();
  const Api& a = api();
  bool bad = aborted_.load() || failed_.load();
  for (auto [comm, stream] : {std::pair{comm_, stream_}, std::pair{p2pComm_, p2pStream_}, std::pair{tagComm_, tagStream_}}) {
    if (bad) {  // abort first: destroying the host stream waits for what is queued on it
      a.ncclCommAbort(comm);
      a.ncclHostStreamDestroy(stream);
    } else {
      a.ncclHostStreamDestroy(stream);
      a.ncclCommDestroy(comm);
    }
  }
  for (auto& [index, dc] : deviceComms_) {
    ncclResult_t ar = ncclSuccess;
    a.ncclCommGetAsyncError(dc.comm, &ar);
    (bad || (ar != ncclSuccess && ar != ncclInProgress)) ? a.ncclCommAbort(dc.comm) : a.ncclCommDestroy(dc.comm);
  }
}

void AcclBackend::abortComm() {
  bool expected = false;
  if (aborted_.compare_exchange_strong(expected, true)) {
    api().ncclCommAbort(comm_);
    api().ncclCommAbort(p2pComm_);
    api().ncclCommAbort(tagComm_);
  }
}

std::string AcclBackend::lastError() const {
  for (ncclComm_t comm : {comm_, p2pComm_, tagComm_}) {
    const char* e = comm ? api().ncclGetLastError(comm) : nullptr;
    if (e && *e) return std::string(e);
  }
  return std::string();
}

void AcclBackend::checkDeviceComm(c10::Device device, const std::string& opName) {
  ncclComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lk(launchMu_);
    auto it = deviceComms_.find(device.index());
    if (it == deviceComms_.end()) return;
    comm = it->second.comm;
  }
  ncclResult_t r = ncclSuccess;
  api().ncclCommGetAsyncError(comm, &r);
  if (r == ncclSuccess || r == ncclInProgress) return;
  const char* e = api().ncclGetLastError(comm);
  std::string msg = c10::str("accl: ", opName, " failed on rank ", rank_, " of ", size_, " (", device, "): ",
                             api().ncclGetErrorString(r), e && *e ? " - " : "", e ? e : "");
  throw c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg);
}

// Names the peers that never entered collective #seq: every rank blocked in a collective for
// over a second publishes its number in the store (watchdogLoop); a peer without that entry
// (or with an older one) is behind or gone. Costs nothing while ops complete promptly.
std::string AcclBackend::missingPeers(uint64_t seq) {
  if (seq == 0) return "";
  std::string missing;
  int n = 0;
  try {
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      std::string key = "accl/blocked/" + std::to_string(p);
      bool behind = true;
      if (store_->check({key})) {
        auto v = store_->get(key);
        behind = std::stoull(std::string(v.begin(), v.end())) < seq;
      }
      if (behind) {
        missing += " " + std::to_string(p);
        ++n;
      }
    }
  } catch (const std::exception&) {
    return "";  // the store itself is gone (its host rank died): nothing more to say
  }
  if (n == 0) return "";
  return c10::str("; missing peer rank", n > 1 ? "s" : "", missing, " (never entered this collective, #", seq, ")");
}

void AcclBackend::check(ncclResult_t r, const char* what) const {
  if (r == ncclSuccess || r == ncclInProgress) return;
  std::string last = lastError();
  TORCH_CHECK(false, "accl: ", what, " failed on rank ", rank_, ": ", api().ncclGetErrorString(r),
              last.empty() ? "" : " - ", last);
}

void AcclBackend::checkSingle(std::vector<at::Tensor>& tensors, const char* name) const {
  TORCH_CHECK(tensors.size() == 1, "accl: ", name, ": expected exactly one tensor per process, got ", tensors.size());
  checkDense(tensors[0], name);
}

void AcclBackend::checkRoot(int64_t root, const char* name) const {
  TORCH_CHECK(root >= 0 && root < size_, "accl: ", name, ": rank ", root, " is outside the group of ", size_);
}

c10::intrusive_ptr<AcclWork> AcclBackend::newWork(c10d::OpType type, const char* name,
                                                  std::chrono::milliseconds timeout,
                                                  const std::vector<at::Tensor>& outputs) {
  TORCH_CHECK(!failed_.load() && !aborted_.load(), "accl: ", name, ": the process group's communicator "
              "failed earlier (", firstError_, "); create a new process group");
  ++seq_;
  auto w = c10::make_intrusive<AcclWork>(rank_, type, name, timeout == c10d::kUnsetTimeout ? timeout_ : timeout,
                                         this, outputs);
  bool p2p = type == c10d::OpType::SEND || type == c10d::OpType::RECV || type == c10d::OpType::RECVANYSOURCE;
  w->collSeq_ = p2p ? 0 : ++collSeq_;
  return w;
}

at::Tensor AcclBackend::stageInOut(at::Tensor& t, AcclWork& w) {
  at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
  w.keepAlive_.push_back(buf);
  if (!buf.is_same(t)) addCopyBack(w, t, buf);
  return buf;
}

at::Tensor AcclBackend::stageOut(const at::Tensor& t, AcclWork& w) {
  at::Tensor buf = t.is_contiguous() ? t : at::empty(t.sizes(), t.options());
  w.keepAlive_.push_back(buf);
  if (!buf.is_same(t)) addCopyBack(w, t, buf);
  return buf;
}

void AcclBackend::addCopyBack(AcclWork& w, at::Tensor dst, at::Tensor src) {
  auto prev = std::move(w.post_);
  w.post_ = [prev, dst, src]() mutable {
    if (prev) prev();
    dst.copy_(src);
  };
}

std::optional<c10::Device> AcclBackend::deviceOf(const AcclWork& work) const {
  // Every buffer of the op must be on one device: it decides the communicator and the path.
  std::optional<c10::Device> device;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (!device) {
      device = t.device();
      return;
    }
    TORCH_CHECK(t.device() == *device, "accl: ", work.opName_, ": tensors on ", *device, " and ", t.device(),
                " in one op; all of an op's tensors must be on one device");
  };
  for (auto& t : work.keepAlive_) visit(t);
  for (auto& t : work.outputs_) visit(t);
  return device;
}

void AcclBackend::launch(const c10::intrusive_ptr<AcclWork>& work, const std::function<void(const Target&)>& body) {
  std::lock_guard<std::mutex> lk(launchMu_);
  flushPendingLocked();
  launchLocked(work, body);
}

void AcclBackend::launchP2P(const c10::intrusive_ptr<AcclWork>& work, std::function<void(const Target&)> body,
                            bool anySource) {
  std::lock_guard<std::mutex> lk(launchMu_);
  std::optional<c10::Device> device = deviceOf(*work);
  bool cpu = !device || device->is_cpu();
  if (!coalescing_ && !cpu) {  // CUDA: nothing blocks the host, so nothing needs holding back
    flushPendingLocked();
    return launchLocked(work, body, /*p2p=*/true);
  }
  if (!pending_.empty() && deviceOf(*pending_.front().work) != device) flushPendingLocked();
  pending_.push_back(PendingOp{work, std::move(body), anySource});
  if (pendingSince_.load() == 0) pendingSince_.store(nowTicks());
}

void AcclBackend::flushP2P() {
  std::lock_guard<std::mutex> lk(launchMu_);
  flushPendingLocked();
}

void AcclBackend::launchTagged(TaggedOp op) {
  std::lock_guard<std::mutex> lk(launchMu_);
  if (coalescing_) batchTagged_.push_back(op.work);
  tagLane_->add(std::move(op));
}

std::string AcclBackend::dropHeld(const AcclWork* w) {
  std::lock_guard<std::mutex> lk(launchMu_);
  std::string why = tagLane_->whyHeld(w);
  if (!tagLane_->drop(w)) return "";
  return why.empty() ? "never matched" : why;
}

void AcclBackend::flushTagsLocked() {
  if (coalescing_ || tagLane_->held() == 0) return;
  TagFlush f;
  try {
    f = tagLane_->take();
  } catch (const std::exception& e) {  // the store is gone: what is held stays held (and times out)
    TORCH_WARN("accl: matching tagged send/recv on rank ", rank_, " failed: ", e.what());
    return;
  }
  for (auto& [w, err] : f.failed) {
    w->hostEnqueued();
    w->finish(err);
  }
  if (f.works.empty() && f.wire.empty()) return;
  c10::intrusive_ptr<AcclWork> work;
  if (f.works.size() == 1 && f.scratch.empty()) {
    work = f.works.front();
  } else {
    std::vector<at::Tensor> outs;
    for (auto& w : f.works) outs.insert(outs.end(), w->outputs_.begin(), w->outputs_.end());
    work = c10::make_intrusive<AcclWork>(rank_, c10d::OpType::COALESCED, "tagged send/recv", timeout_, this, outs);
    work->members_ = f.works;
    work->keepAlive_ = f.scratch;
    for (auto& w : f.works) work->keepAlive_.insert(work->keepAlive_.end(), w->keepAlive_.begin(), w->keepAlive_.end());
  }
  std::vector<TagWire> wire = std::move(f.wire);
  try {
    launchOnLane(work, [this, wire](const Target& tg) {
      if (wire.empty()) return;  // receives served from parked messages only
      const Api& a = api();
      check(a.ncclGroupStart(), "ncclGroupStart");
      try {
        for (auto& x : wire) {
          check(x.send ? a.ncclSend(x.data, (size_t)x.bytes, ncclUint8, x.peer, tg.comm, tg.stream)
                       : a.ncclRecv(x.data, (size_t)x.bytes, ncclUint8, x.peer, tg.comm, tg.stream),
                x.send ? "send (tagged)" : "recv (tagged)");
        }
      } catch (...) {
        a.ncclGroupEnd();
        throw;
      }
      check(a.ncclGroupEnd(), "ncclGroupEnd");
    }, Lane::Tag);
  } catch (...) {
    auto err = std::current_exception();
    for (auto& w : f.works) {
      if (w->launched_.load()) continue;
      w->hostEnqueued();
      w->finish(err);
    }
  }
}

c10::intrusive_ptr<AcclWork> AcclBackend::flushPendingLocked(bool raise) {
  flushTagsLocked();
  if (pending_.empty()) return {};
  std::vector<PendingOp> ops;
  ops.swap(pending_);
  pendingSince_.store(0);
  // Receives from any source learn their peer now, in posting order, so each takes the next
  // message nobody here has claimed (the receives naming a peer claimed theirs when posted).
  // One that finds no sender in time fails alone; the others still start.
  std::exception_ptr claimErr;
  for (auto it = ops.begin(); it != ops.end();) {
    if (!it->anySource) {
      ++it;
      continue;
    }
    try {
      it->work->source_ = ledger_->claimAny(std::chrono::steady_clock::now() + it->work->timeout_, it->work->opName_);
      ++it;
    } catch (...) {
      if (!claimErr) claimErr = std::current_exception();
      it->work->hostEnqueued();
      it->work->finish(std::current_exception());
      it = ops.erase(it);
    }
  }
  if (ops.empty()) {
    if (raise && claimErr) std::rethrow_exception(claimErr);
    return {};
  }
  c10::intrusive_ptr<AcclWork> work = ops.front().work;
  std::function<void(const Target&)> body = ops.front().body;
  if (ops.size() > 1) {
    std::vector<at::Tensor> outs;
    for (auto& op : ops) outs.insert(outs.end(), op.work->outputs_.begin(), op.work->outputs_.end());
    work = c10::make_intrusive<AcclWork>(rank_, c10d::OpType::COALESCED, "coalesced send/recv", timeout_, this, outs);
    for (auto& op : ops) {
      work->members_.push_back(op.work);
      work->keepAlive_.insert(work->keepAlive_.end(), op.work->keepAlive_.begin(), op.work->keepAlive_.end());
    }
    body = [this, ops](const Target& tg) {
      const Api& a = api();
      check(a.ncclGroupStart(), "ncclGroupStart");
      try {
        for (auto& op : ops) op.body(tg);
      } catch (...) {
        a.ncclGroupEnd();
        throw;
      }
      check(a.ncclGroupEnd(), "ncclGroupEnd");
    };
  }
  try {
    launchLocked(work, body, /*p2p=*/true);
  } catch (...) {
    // Whoever flushed (another op, a wait, the watchdog) is not the ops' caller: their Works
    // carry the error, so each op's own wait() raises it.
    auto err = std::current_exception();
    for (auto& op : ops) {
      if (op.work->launched_.load()) continue;
      op.work->hostEnqueued();
      op.work->finish(err);
    }
    if (raise) std::rethrow_exception(err);
    return {};
  }
  if (raise && claimErr) std::rethrow_exception(claimErr);
  return work;
}

void AcclBackend::startCoalescing() {
  std::lock_guard<std::mutex> lk(launchMu_);
  flushPendingLocked();
  coalescing_ = true;
  batchTagged_.clear();
}

c10::intrusive_ptr<c10d::Work> AcclBackend::endCoalescing() {
  std::lock_guard<std::mutex> lk(launchMu_);
  coalescing_ = false;
  std::vector<c10::intrusive_ptr<AcclWork>> parts;
  parts.swap(batchTagged_);
  if (!parts.empty()) {
    // Tagged ops start when they can be matched: the batch's Work completes with all of its parts.
    std::vector<at::Tensor> outs;
    for (auto& p : parts) outs.insert(outs.end(), p->outputs_.begin(), p->outputs_.end());
    auto untagged = flushPendingLocked(/*raise=*/true);
    if (untagged) parts.push_back(untagged);
    auto batch = c10::make_intrusive<AcclWork>(rank_, c10d::OpType::COALESCED, "coalesced send/recv", timeout_,
                                               this, outs);
    batch->hostEnqueued();
    struct Count {
      std::mutex mu;
      size_t left;
      std::exception_ptr err;
    };
    auto count = std::make_shared<Count>();
    count->left = parts.size();
    for (auto& p : parts) {
      p->onFinish([count, batch](std::exception_ptr err) {
        std::unique_lock<std::mutex> lk(count->mu);
        if (err && !count->err) count->err = err;
        if (--count->left > 0) return;
        auto first = count->err;
        lk.unlock();
        batch->finish(first);
      });
    }
    return batch;
  }
  if (!pending_.empty()) return flushPendingLocked(/*raise=*/true);  // endCoalescing's caller sees a failure
  auto work = c10::make_intrusive<AcclWork>(rank_, c10d::OpType::COALESCED, "coalesced (empty)", timeout_, this,
                                            std::vector<at::Tensor>{});
  work->hostEnqueued();
  work->finish(nullptr);
  return work;
}

size_t AcclBackend::abortCoalescing(const std::string& why) {
  std::lock_guard<std::mutex> lk(launchMu_);
  coalescing_ = false;
  std::vector<PendingOp> ops;
  ops.swap(pending_);
  pendingSince_.store(0);
  auto err = std::make_exception_ptr(c10::DistBackendError(
      c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
      c10::str("accl: ", why, " - this op was part of the batch and was never started")));
  for (auto& op : ops) {
    op.work->hostEnqueued();
    op.work->finish(err);
  }
  size_t dropped = ops.size();
  std::vector<c10::intrusive_ptr<AcclWork>> tagged;
  tagged.swap(batchTagged_);
  for (auto& w : tagged) {
    if (!tagLane_->drop(w.get())) continue;
    w->hostEnqueued();
    w->finish(err);
    ++dropped;
  }
  return dropped;
}

void AcclBackend::launchLocked(const c10::intrusive_ptr<AcclWork>& work,
                               const std::function<void(const Target&)>& body, bool p2p) {
  std::optional<c10::Device> device = deviceOf(*work);
  if (!device || device->is_cpu()) return launchOnLane(work, body, p2p ? Lane::P2P : Lane::Coll);
  TORCH_CHECK(device->is_cuda(), "accl: ", work->opName_, ": tensors on ", *device,
              " - the accl backend serves CPU and CUDA tensors");
  launchDevice(work, *device, body);
}

void AcclBackend::launchOnLane(const c10::intrusive_ptr<AcclWork>& work,
                               const std::function<void(const Target&)>& body, Lane lane) {
  cudaStream_t stream = lane == Lane::Tag ? tagStream_ : lane == Lane::P2P ? p2pStream_ : stream_;
  ncclComm_t comm = lane == Lane::Tag ? tagComm_ : lane == Lane::P2P ? p2pComm_ : comm_;
  ncclHostEvent_t ev = nullptr;
  check(api().ncclHostEventCreate(&ev), "ncclHostEventCreate");
  try {
    body(Target{comm, stream});
  } catch (...) {
    api().ncclHostEventDestroy(ev);
    throw;
  }
  check(api().ncclHostEventRecord(ev, stream), "ncclHostEventRecord");
  work->event_ = ev;
  work->hostEnqueued();
  {
    std::lock_guard<std::mutex> qlk(qmu_);
    (lane == Lane::Tag ? tagQueue_ : lane == Lane::P2P ? p2pQueue_ : queue_).push_back(work);
  }
  qcv_.notify_all();
}

// Nothing here blocks the host or queries the GPU, so an op also works inside CUDA graph capture.
void AcclBackend::launchDevice(const c10::intrusive_ptr<AcclWork>& work, c10::Device device,
                               const std::function<void(const Target&)>& body) {
  DeviceComm& dc = deviceComm(device, work->collSeq_ != 0, work->opName_.c_str());
  c10::DeviceGuard deviceGuard(device);
  SideStream& side = *dc.stream;
  side.waitForCurrentStream();  // the inputs (and staging copies) were queued on the current stream
  side.recordTensors(work->keepAlive_);
  side.recordTensors(work->outputs_);
  c10::StreamGuard streamGuard(side.stream());
  body(Target{dc.comm, side.handle()});
  work->runPost();  // copy-back (of every member of a batch), ordered after the op on the side stream
  work->keepAlive_.clear();  // the allocator keeps their memory until the side stream is done
  work->deviceEnqueued(device, side.recordEvent());
}

void AcclBackend::completionLoop(Lane lane) {
  const Api& a = api();
  bool p2p = lane != Lane::Coll;
  auto& queue = lane == Lane::Tag ? tagQueue_ : lane == Lane::P2P ? p2pQueue_ : queue_;
  cudaStream_t stream = lane == Lane::Tag ? tagStream_ : lane == Lane::P2P ? p2pStream_ : stream_;
  ncclComm_t comm = lane == Lane::Tag ? tagComm_ : lane == Lane::P2P ? p2pComm_ : comm_;
  for (;;) {
    c10::intrusive_ptr<AcclWork> w;
    {
      std::unique_lock<std::mutex> lk(qmu_);
      qcv_.wait(lk, [&] { return stopping_ || !queue.empty(); });
      if (queue.empty()) return;  // stopping and drained
      w = queue.front();
      queue.pop_front();
    }
    if (!p2p) {  // the watchdog names the peers missing from a collective
      waitingSince_.store(std::chrono::steady_clock::now().time_since_epoch().count());
      waitingSeq_.store(w->collSeq_);
    }
    a.ncclHostEventSynchronize(w->event_);
    if (!p2p) waitingSeq_.store(0);
    a.ncclHostEventDestroy(w->event_);
    w->event_ = nullptr;
    ncclResult_t sr = a.ncclHostStreamQuery(stream);
    ncclResult_t ar = ncclSuccess;
    a.ncclCommGetAsyncError(comm, &ar);
    ncclResult_t r = (sr != ncclSuccess && sr != ncclInProgress) ? sr : (ar != ncclInProgress ? ar : ncclSuccess);
    std::exception_ptr err;
    if (r != ncclSuccess || aborted_.load()) {
      failed_.store(true);
      std::string last = lastError();
      std::string msg = c10::str("accl: ", w->opName_, " failed on rank ", rank_, " of ", size_, ": ",
                                 aborted_.load() ? "communicator aborted after the process-group timeout"
                                                 : a.ncclGetErrorString(r),
                                 last.empty() ? "" : " - ", last, missingPeers(w->collSeq_));
      {
        std::lock_guard<std::mutex> lk(qmu_);
        if (firstError_.empty()) firstError_ = msg;
      }
      err = std::make_exception_ptr(
          c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg));
    } else {
      try {
        w->runPost();
      } catch (...) {
        err = std::current_exception();
      }
    }
    w->post_ = nullptr;
    w->finish(err);
  }
}

void AcclBackend::watchdogLoop() {
  uint64_t published = 0;
  std::unique_lock<std::mutex> lk(qmu_);
  while (!stopping_) {
    wdCv_.wait_for(lk, std::chrono::milliseconds(100));
    int64_t held = pendingSince_.load();
    int64_t tagHeld = tagLane_->heldSince();
    auto after = std::chrono::steady_clock::duration(kP2PFlushAfter).count();
    if ((held != 0 && nowTicks() - held > after) || (tagHeld != 0 && nowTicks() - tagHeld > after)) {
      lk.unlock();
      flushP2P();  // a failure lands in the ops' Works
      lk.lock();
    }
    uint64_t seq = waitingSeq_.load();
    auto since = std::chrono::steady_clock::duration(waitingSince_.load());
    if (seq == 0 || seq == published ||
        std::chrono::steady_clock::now().time_since_epoch() - since < std::chrono::seconds(1))
      continue;
    lk.unlock();
    try {
      std::string v = std::to_string(seq);
      store_->set("accl/blocked/" + std::to_string(rank_), std::vector<uint8_t>(v.begin(), v.end()));
      published = seq;
    } catch (const std::exception&) {
      published = seq;  // store gone; do not retry every tick
    }
    lk.lock();
  }
}

c10::intrusive_ptr<c10d::Backend> createBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                double timeoutSec) {
  auto ms = std::chrono::milliseconds((int64_t)(timeoutSec * 1000.0));
  return c10::make_intrusive<AcclBackend>(store, rank, size, ms);
}

}  // namespace torch_accl
