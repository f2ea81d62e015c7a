// accl_backend.cc: the torch.distributed backend "accl" (c10d::Backend) over ACCL.
//
// One communicator and one ACCL host stream per process group. Each op validates its tensors
// in the calling thread, enqueues the NCCL calls on the host stream (which runs them on the
// stream's worker thread), records a host event after them and hands the Work to the group's
// completion thread. That thread blocks on the events in order, copies staged outputs back,
// then marks the Work and its Future complete (or failed, with the library's error text).
// Work::wait() honours the process-group timeout: past it the communicator is aborted and
// the wait raises naming the op.
//
// libnccl.so.2 is dlopen()ed by absolute path (RTLD_LOCAL | RTLD_DEEPBIND) and every nccl*
// entry point is taken from that handle, so torch's own NVIDIA NCCL can never be called.
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "accl.h"
#include "nccl.h"

namespace torch_accl {
namespace {

// ---- the library, resolved from one dlopen handle ---------------------------------------------
struct Api {
  void* handle = nullptr;
  std::string path;
#define ACCL_FN(name) decltype(&::name) name = nullptr;
#define ACCL_FNS(X)                                                                           \
  X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort)                  \
  X(ncclCommGetAsyncError) X(ncclGetErrorString) X(ncclGetLastError) X(ncclAllReduce)         \
  X(ncclBroadcast) X(ncclReduce) X(ncclAllGather) X(ncclReduceScatter) X(ncclSend)            \
  X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd) X(ncclHostStreamCreate)                       \
  X(ncclHostStreamDestroy) X(ncclHostStreamQuery) X(ncclHostStreamSynchronize)                \
  X(ncclHostEventCreate) X(ncclHostEventDestroy) X(ncclHostEventRecord)                       \
  X(ncclHostEventSynchronize) X(ncclAcclVersionString)
  ACCL_FNS(ACCL_FN)
#undef ACCL_FN
};
Api g_api;
std::mutex g_apiMu;

void loadLibrary(const std::string& path) {
  std::lock_guard<std::mutex> lk(g_apiMu);
  if (g_api.handle) {
    TORCH_CHECK(g_api.path == path, "torch_accl: already loaded ", g_api.path, ", not ", path);
    return;
  }
  TORCH_CHECK(!path.empty() && path[0] == '/', "torch_accl: library path must be absolute: ", path);
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  TORCH_CHECK(h, "torch_accl: cannot load ACCL's libnccl.so.2 from ", path, ": ", dlerror(),
              " (build it with `make`, or set ACCL_LIBNCCL to its absolute path)");
  Api api;
  api.handle = h;
  api.path = path;
#define ACCL_FN(name)                                                                   \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(h, #name));                    \
  TORCH_CHECK(api.name, "torch_accl: ", path, " lacks ", #name, " - is it ACCL's libnccl?");
  ACCL_FNS(ACCL_FN)
#undef ACCL_FN
  g_api = api;
}

const Api& api() {
  TORCH_CHECK(g_api.handle, "torch_accl: library not loaded (import torch_accl)");
  return g_api;
}

std::string libraryOf(void* fn) {
  Dl_info info{};
  if (dladdr(fn, &info) && info.dli_fname) return info.dli_fname;
  return "?";
}

// ---- types ------------------------------------------------------------------------------------
ncclDataType_t toNccl(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kBool: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kUInt32: return ncclUint32;
    case at::kUInt64: return ncclUint64;
    case at::kFloat8_e4m3fn: return ncclFloat8e4m3;
    case at::kFloat8_e5m2: return ncclFloat8e5m2;
    default:
      TORCH_CHECK(false, "accl: tensor dtype ", t, " has no NCCL equivalent");
  }
}

struct Reduction {
  ncclRedOp_t op = ncclSum;
  bool premul = false;
  double factor = 1.0;
};

Reduction toNccl(const c10d::ReduceOp& rop, at::ScalarType t, const char* opName) {
  Reduction r;
  bool isBool = t == at::kBool;
  switch (rop.op_) {
    case c10d::ReduceOp::SUM: r.op = isBool ? ncclMax : ncclSum; break;
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? ncclMin : ncclProd; break;
    case c10d::ReduceOp::MIN: r.op = ncclMin; break;
    case c10d::ReduceOp::MAX: r.op = ncclMax; break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "accl: ", opName, ": AVG is not defined for bool tensors");
      r.op = ncclAvg;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t), "accl: ", opName,
                  ": PREMUL_SUM needs a floating-point tensor");
      auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(rop.supplement_.get());
      TORCH_CHECK(sup, "accl: ", opName, ": PREMUL_SUM without a factor");
      r.op = ncclSum;
      r.premul = true;
      r.factor = sup->tensor_factor.defined() ? sup->tensor_factor.item<double>() : sup->double_factor;
      break;
    }
    default:
      TORCH_CHECK(false, "accl: ", opName, ": reduce op ", (int)rop.op_, " is not supported "
                  "(BAND/BOR/BXOR have no NCCL equivalent)");
  }
  if (at::isComplexType(t)) {
    TORCH_CHECK(r.op == ncclSum || r.op == ncclAvg, "accl: ", opName,
                ": complex tensors support only SUM, AVG and PREMUL_SUM");
  }
  return r;
}

// A tensor as NCCL sees it: complex viewed as pairs of reals.
at::Tensor asNccl(const at::Tensor& t) { return at::isComplexType(t.scalar_type()) ? at::view_as_real(t) : t; }

void checkCpu(const at::Tensor& t, const char* opName) {
  TORCH_CHECK(t.defined(), "accl: ", opName, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "accl: ", opName, ": tensor on ", t.device(),
              " - the accl backend serves CPU tensors (GPU tensors: use backend='nccl' with ACCL's "
              "libnccl.so.2 preloaded, see docs/pytorch.md)");
  TORCH_CHECK(t.layout() == at::kStrided, "accl: ", opName, ": only dense (strided) tensors are supported");
}

// ---- Work -------------------------------------------------------------------------------------
class AcclBackend;

class AcclWork : public c10d::Work {
 public:
  AcclWork(int rank, c10d::OpType type, std::string opName, std::chrono::milliseconds timeout,
           AcclBackend* backend, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type), opName_(std::move(opName)), timeout_(timeout), backend_(backend),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<at::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  bool isCompleted() override {
    std::lock_guard<std::mutex> lk(mu_);
    return done_;
  }
  bool isSuccess() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return done_ && !error_;
  }
  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return error_;
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  void synchronize() override {}
  bool wait(std::chrono::milliseconds timeout) override;

  // Completion-thread side.
  void finish(std::exception_ptr err) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
      error_ = err;
    }
    cv_.notify_all();
    if (err) {
      future_->setError(err);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  }

  std::string opName_;
  std::chrono::milliseconds timeout_;
  AcclBackend* backend_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keepAlive_;
  std::function<void()> post_;  // staged-output copy-back, run before completion
  ncclHostEvent_t event_ = nullptr;
  c10::intrusive_ptr<at::ivalue::Future> future_;
  uint64_t collSeq_ = 0;  // collective number in this group (0: point-to-point)

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// ---- Backend ----------------------------------------------------------------------------------
class AcclBackend : public c10d::Backend {
 public:
  AcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout)
      : c10d::Backend(rank, size), timeout_(timeout), store_(store) {
    const Api& a = api();
    // The library's own per-op progress timeout follows the process-group timeout, so an op whose
    // peer never shows up fails inside the library (naming the peer) rather than hanging. The
    // library reads ACCL_TIMEOUT once per process; a user setting wins.
    if (!std::getenv("ACCL_TIMEOUT")) {
      long secs = std::max<long>(1, (long)std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
      setenv("ACCL_TIMEOUT", std::to_string(secs).c_str(), 0);
    }
    ncclUniqueId id;
    const std::string key = "accl/unique_id";
    if (rank == 0) {
      check(a.ncclGetUniqueId(&id), "ncclGetUniqueId");
      std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof(id));
      store->set(key, bytes);
    } else {
      std::vector<uint8_t> bytes = store->get(key);
      TORCH_CHECK(bytes.size() == sizeof(id), "accl: bad unique id in the store (", bytes.size(), " bytes)");
      memcpy(&id, bytes.data(), sizeof(id));
    }
    check(a.ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
    check(a.ncclHostStreamCreate(&stream_), "ncclHostStreamCreate");
    completer_ = std::thread([this] { completionLoop(); });
    watchdog_ = std::thread([this] { watchdogLoop(); });
  }

  ~AcclBackend() override { shutdown(); }

  const std::string getBackendName() const override { return "accl"; }
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lk(qmu_);
      if (stopping_) return;
      stopping_ = true;
    }
    qcv_.notify_all();
    wdCv_.notify_all();
    if (completer_.joinable()) completer_.join();
    if (watchdog_.joinable()) watchdog_.join();
    const Api& a = api();
    if (aborted_.load() || failed_.load()) {
      a.ncclCommAbort(comm_);
      a.ncclHostStreamDestroy(stream_);
    } else {
      a.ncclHostStreamDestroy(stream_);
      a.ncclCommDestroy(comm_);
    }
  }

  // Called by a Work whose wait ran out of time.
  void abortComm() {
    bool expected = false;
    if (aborted_.compare_exchange_strong(expected, true)) api().ncclCommAbort(comm_);
  }

  std::string lastError() const {
    const char* e = api().ncclGetLastError(comm_);
    return e && *e ? std::string(e) : std::string();
  }

  std::chrono::milliseconds timeout() const { return timeout_; }

  // Names the peers that never entered collective #seq: every rank blocked in a collective for
  // over a second publishes its number in the store (watchdogLoop); a peer without that entry
  // (or with an older one) is behind or gone. Costs nothing while ops complete promptly.
  std::string missingPeers(uint64_t seq) {
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

  // ---- collectives ----------------------------------------------------------------------------
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    checkSingle(tensors, "allreduce");
    return allreduceImpl(tensors, opts.reduceOp, opts.timeout, "allreduce", c10d::OpType::ALLREDUCE);
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    TORCH_CHECK(!tensors.empty(), "accl: allreduce_coalesced: no tensors");
    return allreduceImpl(tensors, opts.reduceOp, opts.timeout, "allreduce_coalesced",
                         c10d::OpType::ALLREDUCE_COALESCED);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    checkSingle(tensors, "broadcast");
    checkRoot(opts.rootRank, "broadcast");
    auto work = newWork(c10d::OpType::BROADCAST, "broadcast", opts.timeout, tensors);
    Staged s = stageInOut(tensors[0], *work);
    at::Tensor b = asNccl(s.buf);
    launch(work, [&] {
      check(api().ncclBroadcast(b.data_ptr(), b.data_ptr(), b.numel(), toNccl(b.scalar_type()),
                                (int)opts.rootRank, comm_, stream_), "broadcast");
    });
    return work;
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    checkSingle(tensors, "reduce");
    checkRoot(opts.rootRank, "reduce");
    at::Tensor& t = tensors[0];
    Reduction r = toNccl(opts.reduceOp, t.scalar_type(), "reduce");
    auto work = newWork(c10d::OpType::REDUCE, "reduce", opts.timeout, tensors);
    Staged s = stageInOut(t, *work);
    if (r.premul) s.buf.mul_(r.factor);
    at::Tensor b = asNccl(s.buf);
    launch(work, [&] {
      check(api().ncclReduce(b.data_ptr(), b.data_ptr(), b.numel(), toNccl(b.scalar_type()), r.op,
                             (int)opts.rootRank, comm_, stream_), "reduce");
    });
    return work;
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    checkSingle(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1, "accl: allgather: expected one output list");
    return allgatherLists(outputs, inputs, opts.timeout, "allgather", c10d::OpType::ALLGATHER);
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "accl: allgather_coalesced: ", outputs.size(),
                " output lists for ", inputs.size(), " inputs");
    return allgatherLists(outputs, inputs, opts.timeout, "allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    std::vector<at::Tensor> outs{output}, ins{input};
    return allgatherTensors(outs, ins, opts.timeout, "all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE);
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override {
    return allgatherTensors(outputs, inputs, opts.timeout, "allgather_into_tensor_coalesced",
                            c10d::OpType::COALESCED);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    checkSingle(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1 && (int)inputs[0].size() == size_,
                "accl: reduce_scatter: expected one input list of ", size_, " tensors");
    at::Tensor& out = outputs[0];
    for (auto& t : inputs[0]) {
      checkCpu(t, "reduce_scatter");
      TORCH_CHECK(t.scalar_type() == out.scalar_type() && t.numel() == out.numel(),
                  "accl: reduce_scatter: every input must match the output's dtype and size");
    }
    at::Tensor flat = at::cat(flattenAll(inputs[0]));  // a fresh, contiguous copy
    std::vector<at::Tensor> outs{out}, ins2{flat};
    return reduceScatterTensors(outs, ins2, opts.reduceOp, opts.timeout, "reduce_scatter",
                                c10d::OpType::REDUCE_SCATTER, outputs);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    std::vector<at::Tensor> outs{output}, ins{input};
    return reduceScatterTensors(outs, ins, opts.reduceOp, opts.timeout, "reduce_scatter_tensor",
                                c10d::OpType::_REDUCE_SCATTER_BASE, outs);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    return reduceScatterTensors(outputs, inputs, opts.reduceOp, opts.timeout, "reduce_scatter_tensor_coalesced",
                                c10d::OpType::COALESCED, outputs);
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outSplits, std::vector<int64_t>& inSplits,
                                               const c10d::AllToAllOptions& opts) override {
    const char* name = "alltoall_base";
    checkCpu(output, name);
    checkCpu(input, name);
    TORCH_CHECK(input.scalar_type() == output.scalar_type(), "accl: ", name, ": dtype mismatch");
    auto splits = [&](std::vector<int64_t>& s, const at::Tensor& t, const char* which) {
      std::vector<int64_t> rows;
      if (s.empty()) {
        TORCH_CHECK(t.dim() > 0 && t.size(0) % size_ == 0, "accl: ", name, ": ", which,
                    " dim 0 (", t.dim() ? t.size(0) : 0, ") is not divisible by the group size ", size_);
        rows.assign(size_, t.size(0) / size_);
      } else {
        TORCH_CHECK((int)s.size() == size_, "accl: ", name, ": ", which, " split sizes need ", size_, " entries");
        int64_t sum = 0;
        for (auto v : s) sum += v;
        TORCH_CHECK(t.dim() > 0 && sum == t.size(0), "accl: ", name, ": ", which, " split sizes sum to ", sum,
                    ", tensor dim 0 is ", t.dim() ? t.size(0) : 0);
        rows = s;
      }
      return rows;
    };
    std::vector<int64_t> inRows = splits(inSplits, input, "input"), outRows = splits(outSplits, output, "output");
    auto work = newWork(c10d::OpType::ALLTOALL_BASE, name, opts.timeout, {output});
    at::Tensor in = asNccl(input.contiguous());
    work->keepAlive_.push_back(in);
    Staged s = stageOut(output, *work);
    at::Tensor out = asNccl(s.buf);
    int64_t inRow = input.dim() ? in.numel() / std::max<int64_t>(1, input.size(0)) : 0;
    int64_t outRow = output.dim() ? out.numel() / std::max<int64_t>(1, output.size(0)) : 0;
    size_t esz = in.element_size();
    ncclDataType_t dt = toNccl(in.scalar_type());
    launch(work, [&] {
      const Api& a = api();
      check(a.ncclGroupStart(), "ncclGroupStart");
      int64_t inOff = 0, outOff = 0;
      for (int p = 0; p < size_; ++p) {
        check(a.ncclSend((char*)in.data_ptr() + inOff * inRow * esz, inRows[p] * inRow, dt, p, comm_, stream_), name);
        check(a.ncclRecv((char*)out.data_ptr() + outOff * outRow * esz, outRows[p] * outRow, dt, p, comm_, stream_), name);
        inOff += inRows[p];
        outOff += outRows[p];
      }
      check(a.ncclGroupEnd(), "ncclGroupEnd");
    });
    return work;
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    const char* name = "alltoall";
    TORCH_CHECK((int)outputs.size() == size_ && (int)inputs.size() == size_, "accl: ", name,
                ": expected ", size_, " input and output tensors");
    auto work = newWork(c10d::OpType::ALLTOALL, name, opts.timeout, outputs);
    std::vector<at::Tensor> ins, outs;
    for (int p = 0; p < size_; ++p) {
      checkCpu(inputs[p], name);
      checkCpu(outputs[p], name);
      TORCH_CHECK(inputs[p].scalar_type() == outputs[p].scalar_type(), "accl: ", name, ": dtype mismatch");
      ins.push_back(asNccl(inputs[p].contiguous()));
      outs.push_back(asNccl(stageOut(outputs[p], *work).buf));
    }
    work->keepAlive_.insert(work->keepAlive_.end(), ins.begin(), ins.end());
    launch(work, [&] {
      const Api& a = api();
      check(a.ncclGroupStart(), "ncclGroupStart");
      for (int p = 0; p < size_; ++p) {
        check(a.ncclSend(ins[p].data_ptr(), ins[p].numel(), toNccl(ins[p].scalar_type()), p, comm_, stream_), name);
        check(a.ncclRecv(outs[p].data_ptr(), outs[p].numel(), toNccl(outs[p].scalar_type()), p, comm_, stream_), name);
      }
      check(a.ncclGroupEnd(), "ncclGroupEnd");
    });
    return work;
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    const char* name = "gather";
    checkSingle(inputs, name);
    checkRoot(opts.rootRank, name);
    int root = (int)opts.rootRank;
    at::Tensor in = asNccl(inputs[0].contiguous());
    std::vector<at::Tensor> outList;
    if (rank_ == root) {
      TORCH_CHECK(outputs.size() == 1 && (int)outputs[0].size() == size_, "accl: gather: the root needs one list of ",
                  size_, " output tensors");
      outList = outputs[0];
    } else {
      TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                  "accl: gather: only the root passes output tensors");
    }
    auto work = newWork(c10d::OpType::GATHER, name, opts.timeout, outList);
    work->keepAlive_.push_back(in);
    std::vector<at::Tensor> outs;
    for (auto& o : outList) {
      checkCpu(o, name);
      TORCH_CHECK(o.numel() == inputs[0].numel() && o.scalar_type() == inputs[0].scalar_type(),
                  "accl: gather: output tensors must match the input's size and dtype");
      outs.push_back(asNccl(stageOut(o, *work).buf));
    }
    ncclDataType_t dt = toNccl(in.scalar_type());
    launch(work, [&] {
      const Api& a = api();
      check(a.ncclGroupStart(), "ncclGroupStart");
      if (rank_ == root) {
        for (int p = 0; p < size_; ++p) check(a.ncclRecv(outs[p].data_ptr(), outs[p].numel(), dt, p, comm_, stream_), name);
      }
      check(a.ncclSend(in.data_ptr(), in.numel(), dt, root, comm_, stream_), name);
      check(a.ncclGroupEnd(), "ncclGroupEnd");
    });
    return work;
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    const char* name = "scatter";
    checkSingle(outputs, name);
    checkRoot(opts.rootRank, name);
    int root = (int)opts.rootRank;
    std::vector<at::Tensor> ins;
    if (rank_ == root) {
      TORCH_CHECK(inputs.size() == 1 && (int)inputs[0].size() == size_, "accl: scatter: the root needs one list of ",
                  size_, " input tensors");
      for (auto& t : inputs[0]) {
        checkCpu(t, name);
        TORCH_CHECK(t.numel() == outputs[0].numel() && t.scalar_type() == outputs[0].scalar_type(),
                    "accl: scatter: input tensors must match the output's size and dtype");
        ins.push_back(asNccl(t.contiguous()));
      }
    } else {
      TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                  "accl: scatter: only the root passes input tensors");
    }
    auto work = newWork(c10d::OpType::SCATTER, name, opts.timeout, outputs);
    work->keepAlive_.insert(work->keepAlive_.end(), ins.begin(), ins.end());
    at::Tensor out = asNccl(stageOut(outputs[0], *work).buf);
    ncclDataType_t dt = toNccl(out.scalar_type());
    launch(work, [&] {
      const Api& a = api();
      check(a.ncclGroupStart(), "ncclGroupStart");
      if (rank_ == root) {
        for (int p = 0; p < size_; ++p) check(a.ncclSend(ins[p].data_ptr(), ins[p].numel(), dt, p, comm_, stream_), name);
      }
      check(a.ncclRecv(out.data_ptr(), out.numel(), dt, root, comm_, stream_), name);
      check(a.ncclGroupEnd(), "ncclGroupEnd");
    });
    return work;
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int /*tag*/) override {
    checkSingle(tensors, "send");
    checkRoot(dst, "send");
    auto work = newWork(c10d::OpType::SEND, "send", c10d::kUnsetTimeout, tensors);
    at::Tensor in = asNccl(tensors[0].contiguous());
    work->keepAlive_.push_back(in);
    launch(work, [&] {
      check(api().ncclSend(in.data_ptr(), in.numel(), toNccl(in.scalar_type()), dst, comm_, stream_), "send");
    });
    return work;
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int /*tag*/) override {
    checkSingle(tensors, "recv");
    checkRoot(src, "recv");
    auto work = newWork(c10d::OpType::RECV, "recv", c10d::kUnsetTimeout, tensors);
    at::Tensor out = asNccl(stageOut(tensors[0], *work).buf);
    launch(work, [&] {
      check(api().ncclRecv(out.data_ptr(), out.numel(), toNccl(out.scalar_type()), src, comm_, stream_), "recv");
    });
    return work;
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>&, int) override {
    TORCH_CHECK(false, "accl: recv from any source is not supported (NCCL point-to-point needs the "
                "source rank); pass src= to dist.recv");
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    std::vector<at::Tensor> t{at::zeros({1}, at::kFloat)};
    auto work = allreduceImpl(t, c10d::ReduceOp::SUM, opts.timeout, "barrier", c10d::OpType::BARRIER);
    return work;
  }

 private:
  struct Staged {
    at::Tensor buf;
  };

  void check(ncclResult_t r, const char* what) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    std::string last = g_api.handle ? lastError() : std::string();
    TORCH_CHECK(false, "accl: ", what, " failed on rank ", rank_, ": ", api().ncclGetErrorString(r),
                last.empty() ? "" : " - ", last);
  }

  void checkSingle(std::vector<at::Tensor>& tensors, const char* name) {
    TORCH_CHECK(tensors.size() == 1, "accl: ", name, ": expected exactly one tensor per process, got ", tensors.size());
    checkCpu(tensors[0], name);
  }

  void checkRoot(int64_t root, const char* name) {
    TORCH_CHECK(root >= 0 && root < size_, "accl: ", name, ": rank ", root, " is outside the group of ", size_);
  }

  std::vector<at::Tensor> flattenAll(const std::vector<at::Tensor>& ts) {
    std::vector<at::Tensor> r;
    for (auto& t : ts) r.push_back(t.reshape({-1}));
    return r;
  }

  c10::intrusive_ptr<AcclWork> newWork(c10d::OpType type, const char* name, std::chrono::milliseconds timeout,
                                       const std::vector<at::Tensor>& outputs) {
    TORCH_CHECK(!failed_.load() && !aborted_.load(), "accl: ", name, ": the process group's communicator "
                "failed earlier (", firstError_, "); create a new process group");
    ++seq_;
    auto w = c10::make_intrusive<AcclWork>(rank_, type, name, timeout == c10d::kUnsetTimeout ? timeout_ : timeout,
                                           this, outputs);
    bool p2p = type == c10d::OpType::SEND || type == c10d::OpType::RECV;
    w->collSeq_ = p2p ? 0 : ++collSeq_;
    return w;
  }

  // A contiguous buffer NCCL may read and write; copied back into t on completion if needed.
  Staged stageInOut(at::Tensor& t, AcclWork& w) {
    if (t.is_contiguous()) {
      w.keepAlive_.push_back(t);
      return {t};
    }
    at::Tensor buf = t.contiguous();
    addCopyBack(w, t, buf);
    return {buf};
  }
  // Same, for a pure output (no need to copy its old contents in).
  Staged stageOut(const at::Tensor& t, AcclWork& w) {
    if (t.is_contiguous()) {
      w.keepAlive_.push_back(t);
      return {t};
    }
    at::Tensor buf = at::empty(t.sizes(), t.options());
    addCopyBack(w, t, buf);
    return {buf};
  }
  void addCopyBack(AcclWork& w, at::Tensor dst, at::Tensor src) {
    auto prev = std::move(w.post_);
    w.post_ = [prev, dst, src]() mutable {
      if (prev) prev();
      dst.copy_(src);
    };
  }

  c10::intrusive_ptr<c10d::Work> allreduceImpl(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& rop,
                                               std::chrono::milliseconds timeout, const char* name, c10d::OpType type) {
    std::vector<Reduction> reds;
    for (auto& t : tensors) {
      checkCpu(t, name);
      reds.push_back(toNccl(rop, t.scalar_type(), name));
    }
    auto work = newWork(type, name, timeout, tensors);
    std::vector<at::Tensor> bufs;
    for (size_t i = 0; i < tensors.size(); ++i) {
      at::Tensor b = stageInOut(tensors[i], *work).buf;
      if (reds[i].premul) b.mul_(reds[i].factor);
      bufs.push_back(asNccl(b));
    }
    launch(work, [&] {
      const Api& a = api();
      if (bufs.size() > 1) check(a.ncclGroupStart(), "ncclGroupStart");
      for (size_t i = 0; i < bufs.size(); ++i) {
        at::Tensor& b = bufs[i];
        check(a.ncclAllReduce(b.data_ptr(), b.data_ptr(), b.numel(), toNccl(b.scalar_type()), reds[i].op, comm_,
                              stream_), name);
      }
      if (bufs.size() > 1) check(a.ncclGroupEnd(), "ncclGroupEnd");
    });
    return work;
  }

  // Output lists (allgather, allgather_coalesced): gather into a flat buffer, then copy out.
  c10::intrusive_ptr<c10d::Work> allgatherLists(std::vector<std::vector<at::Tensor>>& outputs,
                                                std::vector<at::Tensor>& inputs, std::chrono::milliseconds timeout,
                                                const char* name, c10d::OpType type) {
    std::vector<at::Tensor> flatOuts, ins, all;
    for (size_t i = 0; i < inputs.size(); ++i) {
      checkCpu(inputs[i], name);
      TORCH_CHECK((int)outputs[i].size() == size_, "accl: ", name, ": expected ", size_, " output tensors");
      for (auto& o : outputs[i]) {
        checkCpu(o, name);
        TORCH_CHECK(o.numel() == inputs[i].numel() && o.scalar_type() == inputs[i].scalar_type(),
                    "accl: ", name, ": output tensors must match the input's size and dtype");
        all.push_back(o);
      }
      ins.push_back(asNccl(inputs[i].contiguous()));
      flatOuts.push_back(at::empty({(int64_t)size_ * ins.back().numel()}, ins.back().options()));
    }
    auto work = newWork(type, name, timeout, all);
    work->keepAlive_ = ins;
    work->keepAlive_.insert(work->keepAlive_.end(), flatOuts.begin(), flatOuts.end());
    auto outsCopy = outputs;
    auto flats = flatOuts;
    work->post_ = [outsCopy, flats]() mutable {
      for (size_t i = 0; i < outsCopy.size(); ++i) {
        auto chunks = flats[i].chunk((int64_t)outsCopy[i].size());
        for (size_t p = 0; p < outsCopy[i].size(); ++p) {
          at::Tensor& o = outsCopy[i][p];
          asNccl(o).copy_(chunks[p].view(asNccl(o).sizes()));
        }
      }
    };
    launch(work, [&] { allGatherEach(ins, flatOuts, name); });
    return work;
  }

  // One all-gather per input into the matching flat output, grouped when there are several.
  void allGatherEach(const std::vector<at::Tensor>& ins, const std::vector<at::Tensor>& outs, const char* name) {
    const Api& a = api();
    if (ins.size() > 1) check(a.ncclGroupStart(), "ncclGroupStart");
    for (size_t i = 0; i < ins.size(); ++i) {
      check(a.ncclAllGather(ins[i].data_ptr(), outs[i].data_ptr(), ins[i].numel(), toNccl(ins[i].scalar_type()), comm_,
                            stream_),
            name);
    }
    if (ins.size() > 1) check(a.ncclGroupEnd(), "ncclGroupEnd");
  }

  // Output tensors of size_ x input (all_gather_into_tensor and its coalesced form).
  c10::intrusive_ptr<c10d::Work> allgatherTensors(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                  std::chrono::milliseconds timeout, const char* name,
                                                  c10d::OpType type) {
    TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), "accl: ", name, ": inputs and outputs differ in count");
    for (size_t i = 0; i < inputs.size(); ++i) {
      checkCpu(inputs[i], name);
      checkCpu(outputs[i], name);
      TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(), "accl: ", name, ": dtype mismatch");
      TORCH_CHECK(outputs[i].numel() == (int64_t)size_ * inputs[i].numel(), "accl: ", name, ": output has ",
                  outputs[i].numel(), " elements, expected group size x input = ", (int64_t)size_ * inputs[i].numel());
    }
    auto work = newWork(type, name, timeout, outputs);
    std::vector<at::Tensor> ins, outs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      ins.push_back(asNccl(inputs[i].contiguous()));
      outs.push_back(asNccl(stageOut(outputs[i], *work).buf));
    }
    work->keepAlive_.insert(work->keepAlive_.end(), ins.begin(), ins.end());
    launch(work, [&] { allGatherEach(ins, outs, name); });
    return work;
  }

  c10::intrusive_ptr<c10d::Work> reduceScatterTensors(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                      const c10d::ReduceOp& rop, std::chrono::milliseconds timeout,
                                                      const char* name, c10d::OpType type,
                                                      const std::vector<at::Tensor>& userOutputs) {
    TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), "accl: ", name, ": inputs and outputs differ in count");
    std::vector<Reduction> reds;
    for (size_t i = 0; i < inputs.size(); ++i) {
      checkCpu(inputs[i], name);
      checkCpu(outputs[i], name);
      TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(), "accl: ", name, ": dtype mismatch");
      TORCH_CHECK(inputs[i].numel() == (int64_t)size_ * outputs[i].numel(), "accl: ", name, ": input has ",
                  inputs[i].numel(), " elements, expected group size x output = ", (int64_t)size_ * outputs[i].numel());
      reds.push_back(toNccl(rop, inputs[i].scalar_type(), name));
    }
    auto work = newWork(type, name, timeout, userOutputs);
    std::vector<at::Tensor> ins, outs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      at::Tensor in = inputs[i].contiguous();
      if (reds[i].premul) in = in.mul(reds[i].factor);
      ins.push_back(asNccl(in));
      outs.push_back(asNccl(stageOut(outputs[i], *work).buf));
    }
    work->keepAlive_.insert(work->keepAlive_.end(), ins.begin(), ins.end());
    launch(work, [&] {
      const Api& a = api();
      if (ins.size() > 1) check(a.ncclGroupStart(), "ncclGroupStart");
      for (size_t i = 0; i < ins.size(); ++i) {
        check(a.ncclReduceScatter(ins[i].data_ptr(), outs[i].data_ptr(), outs[i].numel(),
                                  toNccl(ins[i].scalar_type()), reds[i].op, comm_, stream_), name);
      }
      if (ins.size() > 1) check(a.ncclGroupEnd(), "ncclGroupEnd");
    });
    return work;
  }

  // Enqueues `body` (NCCL calls on stream_), records the completion event, queues the Work.
  void launch(const c10::intrusive_ptr<AcclWork>& work, const std::function<void()>& body) {
    std::lock_guard<std::mutex> lk(launchMu_);
    ncclHostEvent_t ev = nullptr;
    check(api().ncclHostEventCreate(&ev), "ncclHostEventCreate");
    try {
      body();
    } catch (...) {
      api().ncclHostEventDestroy(ev);
      throw;
    }
    check(api().ncclHostEventRecord(ev, stream_), "ncclHostEventRecord");
    work->event_ = ev;
    {
      std::lock_guard<std::mutex> qlk(qmu_);
      queue_.push_back(work);
    }
    qcv_.notify_one();
  }

  void completionLoop() {
    const Api& a = api();
    for (;;) {
      c10::intrusive_ptr<AcclWork> w;
      {
        std::unique_lock<std::mutex> lk(qmu_);
        qcv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        w = queue_.front();
        queue_.pop_front();
      }
      waitingSince_.store(std::chrono::steady_clock::now().time_since_epoch().count());
      waitingSeq_.store(w->collSeq_);
      a.ncclHostEventSynchronize(w->event_);
      waitingSeq_.store(0);
      a.ncclHostEventDestroy(w->event_);
      w->event_ = nullptr;
      ncclResult_t sr = a.ncclHostStreamQuery(stream_);
      ncclResult_t ar = ncclSuccess;
      a.ncclCommGetAsyncError(comm_, &ar);
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
        err = std::make_exception_ptr(c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg));
      } else if (w->post_) {
        try {
          w->post_();
        } catch (...) {
          err = std::current_exception();
        }
      }
      w->post_ = nullptr;
      w->keepAlive_.clear();
      w->finish(err);
    }
  }

  std::chrono::milliseconds timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::mutex launchMu_;
  std::mutex qmu_;
  std::condition_variable qcv_;   // completion thread: work queued / stopping
  std::condition_variable wdCv_;  // watchdog: stopping
  std::deque<c10::intrusive_ptr<AcclWork>> queue_;
  bool stopping_ = false;
  std::string firstError_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> failed_{false};
  std::thread completer_;
  std::thread watchdog_;
  uint64_t seq_ = 0;
  uint64_t collSeq_ = 0;
  c10::intrusive_ptr<c10d::Store> store_;
  std::atomic<uint64_t> waitingSeq_{0};
  std::atomic<int64_t> waitingSince_{0};

  void watchdogLoop() {
    uint64_t published = 0;
    std::unique_lock<std::mutex> lk(qmu_);
    while (!stopping_) {
      wdCv_.wait_for(lk, std::chrono::milliseconds(500));
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
};

bool AcclWork::wait(std::chrono::milliseconds timeout) {
  auto limit = (timeout == kNoTimeout || timeout.count() <= 0) ? timeout_ : timeout;
  std::unique_lock<std::mutex> lk(mu_);
  // The library fails the op itself after ACCL_TIMEOUT (= the group timeout) naming the peer;
  // this deadline (plus a grace period) only catches what the library could not.
  auto grace = limit + std::chrono::seconds(5);
  if (!cv_.wait_for(lk, grace, [&] { return done_; })) {
    lk.unlock();
    std::string last = backend_->lastError();
    backend_->abortComm();
    lk.lock();
    cv_.wait_for(lk, std::chrono::seconds(5), [&] { return done_; });
    TORCH_CHECK(false, "accl: ", opName_, " on rank ", rank_, " timed out after ", limit.count(),
                " ms (process-group timeout)", backend_->missingPeers(collSeq_),
                last.empty() ? "" : " - ", last, ". The communicator was aborted.");
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

c10::intrusive_ptr<c10d::Backend> createBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                double timeoutSec) {
  auto ms = std::chrono::milliseconds((int64_t)(timeoutSec * 1000.0));
  pybind11::gil_scoped_release nogil;
  return c10::make_intrusive<AcclBackend>(store, rank, size, ms);
}

}  // namespace
}  // namespace torch_accl

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("load_library", &torch_accl::loadLibrary, "dlopen ACCL's libnccl.so.2 by absolute path");
  m.def("accl_version", [] { return std::string(torch_accl::api().ncclAcclVersionString()); });
  m.def("library_path", [] {
    return torch_accl::libraryOf(reinterpret_cast<void*>(torch_accl::api().ncclAllReduce));
  });
  m.def("create_backend", &torch_accl::createBackend, "create an accl c10d Backend");
}
