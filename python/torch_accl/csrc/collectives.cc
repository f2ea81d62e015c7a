// collectives.cc: the c10d ops of the "accl" backend. Each checks its tensors, stages what NCCL
// cannot use in place, and hands its NCCL calls to launch() (backend.cc), which runs them on the
// host stream (CPU tensors) or the group's side stream on the tensors' GPU (CUDA tensors).
#include <algorithm>
#include <cstdint>
#include "backend.h"

namespace torch_accl {
namespace {
std::vector<at::Tensor> flattenAll(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> r;
  for (auto& t : ts) r.push_back(t.reshape({-1}));
  return r;
}
}  // namespace

c10::intrusive_ptr<c10d::Work> AcclBackend::allreduce(std::vector<at::Tensor>& tensors,
                                         const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "accl: allreduce: expected exactly one tensor per process, got ", tensors.size());
  if (tensors[0].defined() && tensors[0].layout() == at::kSparse) return allreduceSparse(tensors[0], opts);
  checkSingle(tensors, "allreduce");
  return allreduceImpl(tensors, opts.reduceOp, opts.timeout, "allreduce", c10d::OpType::ALLREDUCE);
}

c10::intrusive_ptr<c10d::Work> AcclBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                   const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "accl: allreduce_coalesced: no tensors");
  return allreduceImpl(tensors, opts.reduceOp, opts.timeout, "allreduce_coalesced",
                       c10d::OpType::ALLREDUCE_COALESCED);
}

c10::intrusive_ptr<c10d::Work> AcclBackend::broadcast(std::vector<at::Tensor>& tensors,
                                         const c10d::BroadcastOptions& opts) {
  checkSingle(tensors, "broadcast");
  checkRoot(opts.rootRank, "broadcast");
  auto work = newWork(c10d::OpType::BROADCAST, "broadcast", opts.timeout, tensors);
  at::Tensor b = asNccl(stageInOut(tensors[0], *work));
  launch(work, [&](const Target& tg) {
    check(api().ncclBroadcast(b.data_ptr(), b.data_ptr(), b.numel(), toNccl(b.scalar_type()),
                              (int)opts.rootRank, tg.comm, tg.stream), "broadcast");
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> AcclBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  checkSingle(tensors, "reduce");
  checkRoot(opts.rootRank, "reduce");
  at::Tensor& t = tensors[0];
  Reduction r = toNccl(opts.reduceOp, t.scalar_type(), "reduce");
  auto work = newWork(c10d::OpType::REDUCE, "reduce", opts.timeout, tensors);
  at::Tensor buf = stageInOut(t, *work);
  if (r.premul) scaleInPlace(buf, r);
  at::Tensor b = asNccl(buf);
  launch(work, [&](const Target& tg) {
    check(api().ncclReduce(b.data_ptr(), b.data_ptr(), b.numel(), toNccl(b.scalar_type()), r.op,
                           (int)opts.rootRank, tg.comm, tg.stream), "reduce");
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> AcclBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                         std::vector<at::Tensor>& inputs,
                                         const c10d::AllgatherOptions& opts) {
  checkSingle(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "accl: allgather: expected one output list");
  return allgatherLists(outputs, inputs, opts.timeout, "allgather", c10d::OpType::ALLGATHER);
}

// PyTorch's layout (as documented, and as gloo reads it): outputs[rank][input], one list per rank
// holding a tensor like each input.
c10::intrusive_ptr<c10d::Work> AcclBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::AllgatherOptions& opts) {
  const char* name = "allgather_coalesced";
  TORCH_CHECK((int)outputs.size() == size_, "accl: ", name, ": expected one output list per rank (", size_,
              "), got ", outputs.size());
  // Transposed to the [input][rank] lists allgatherLists fills.
  std::vector<std::vector<at::Tensor>> byInput(inputs.size());
  for (int p = 0; p < size_; ++p) {
    TORCH_CHECK(outputs[p].size() == inputs.size(), "accl: ", name, ": output list of rank ", p, " has ",
                outputs[p].size(), " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) byInput[i].push_back(outputs[p][i]);
  }
  return allgatherLists(byInput, inputs, opts.timeout, name, c10d::OpType::ALLGATHER_COALESCED);
}

c10::intrusive_ptr<c10d::Work> AcclBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                               const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return allgatherTensors(outs, ins, opts.timeout, "all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE);
}

c10::intrusive_ptr<c10d::Work> AcclBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions& opts) {
  return allgatherTensors(outputs, inputs, opts.timeout, "allgather_into_tensor_coalesced",
                          c10d::OpType::COALESCED);
}

c10::intrusive_ptr<c10d::Work> AcclBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                              std::vector<std::vector<at::Tensor>>& inputs,
                                              const c10d::ReduceScatterOptions& opts) {
  checkSingle(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && (int)inputs[0].size() == size_,
              "accl: reduce_scatter: expected one input list of ", size_, " tensors");
  at::Tensor& out = outputs[0];
  for (auto& t : inputs[0]) {
    checkDense(t, "reduce_scatter");
    TORCH_CHECK(t.scalar_type() == out.scalar_type() && t.numel() == out.numel(),
                "accl: reduce_scatter: every input must match the output's dtype and size");
  }
  at::Tensor flat = at::cat(flattenAll(inputs[0]));  // a fresh, contiguous copy
  std::vector<at::Tensor> outs{out}, ins2{flat};
  return reduceScatterTensors(outs, ins2, opts.reduceOp, opts.timeout, "reduce_scatter",
                              c10d::OpType::REDUCE_SCATTER, outputs);
}

c10::intrusive_ptr<c10d::Work> AcclBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                    const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return reduceScatterTensors(outs, ins, opts.reduceOp, opts.timeout, "reduce_scatter_tensor",
                              c10d::OpType::_REDUCE_SCATTER_BASE, outs);
}

c10::intrusive_ptr<c10d::Work> AcclBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::ReduceScatterOptions& opts) {
  return reduceScatterTensors(outputs, inputs, opts.reduceOp, opts.timeout, "reduce_scatter_tensor_coalesced",
                              c10d::OpType::COALESCED, outputs);
}

c10::intrusive_ptr<c10d::Work> AcclBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                             std::vector<int64_t>& outSplits, std::vector<int64_t>& inSplits,
                                             const c10d::AllToAllOptions& opts) {
  const char* name = "alltoall_base";
  checkDense(output, name);
  checkDense(input, name);
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
  at::Tensor out = asNccl(stageOut(output, *work));
  int64_t inRow = input.dim() ? in.numel() / std::max<int64_t>(1, input.size(0)) : 0;
  int64_t outRow = output.dim() ? out.numel() / std::max<int64_t>(1, output.size(0)) : 0;
  size_t esz = in.element_size();
  ncclDataType_t dt = toNccl(in.scalar_type());
  launch(work, [&](const Target& tg) {
    const Api& a = api();
    check(a.ncclGroupStart(), "ncclGroupStart");
    int64_t inOff = 0, outOff = 0;
    for (int p = 0; p < size_; ++p) {
      check(a.ncclSend((char*)in.data_ptr() + inOff * inRow * esz, inRows[p] * inRow, dt, p, tg.comm, tg.stream), name);
      check(a.ncclRecv((char*)out.data_ptr() + outOff * outRow * esz, outRows[p] * outRow, dt, p, tg.comm, tg.stream), name);
      inOff += inRows[p];
      outOff += outRows[p];
    }
    check(a.ncclGroupEnd(), "ncclGroupEnd");
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> AcclBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::AllToAllOptions& opts) {
  const char* name = "alltoall";
  TORCH_CHECK((int)outputs.size() == size_ && (int)inputs.size() == size_, "accl: ", name,
              ": expected ", size_, " input and output tensors");
  auto work = newWork(c10d::OpType::ALLTOALL, name, opts.timeout, outputs);
  std::vector<at::Tensor> ins, outs;
  for (int p = 0; p < size_; ++p) {
    checkDense(inputs[p], name);
    checkDense(outputs[p], name);
    TORCH_CHECK(inputs[p].scalar_type() == outputs[p].scalar_type(), "accl: ", name, ": dtype mismatch");
    ins.push_back(asNccl(inputs[p].contiguous()));
    outs.push_back(asNccl(stageOut(outputs[p], *work)));
  }
  work->keepAlive_.insert(work->keepAlive_.end(), ins.begin(), ins.end());
  launch(work, [&](const Target& tg) {
    const Api& a = api();
    check(a.ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; p < size_; ++p) {
      check(a.ncclSend(ins[p].data_ptr(), ins[p].numel(), toNccl(ins[p].scalar_type()), p, tg.comm, tg.stream), name);
      check(a.ncclRecv(outs[p].data_ptr(), outs[p].numel(), toNccl(outs[p].scalar_type()), p, tg.comm, tg.stream), name);
    }
    check(a.ncclGroupEnd(), "ncclGroupEnd");
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> AcclBackend::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                      const c10d::GatherOptions& opts) {
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
    checkDense(o, name);
    TORCH_CHECK(o.numel() == inputs[0].numel() && o.scalar_type() == inputs[0].scalar_type(),
                "accl: gather: output tensors must match the input's size and dtype");
    outs.push_back(asNccl(stageOut(o, *work)));
  }
  ncclDataType_t dt = toNccl(in.scalar_type());
  launch(work, [&](const Target& tg) {
    const Api& a = api();
    check(a.ncclGroupStart(), "ncclGroupStart");
    if (rank_ == root) {
      for (int p = 0; p < size_; ++p) check(a.ncclRecv(outs[p].data_ptr(), outs[p].numel(), dt, p, tg.comm, tg.stream), name);
    }
    check(a.ncclSend(in.data_ptr(), in.numel(), dt, root, tg.comm, tg.stream), name);
    check(a.ncclGroupEnd(), "ncclGroupEnd");
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> AcclBackend::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                       const c10d::ScatterOptions& opts) {
  const char* name = "scatter";
  checkSingle(outputs, name);
  checkRoot(opts.rootRank, name);
  int root = (int)opts.rootRank;
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && (int)inputs[0].size() == size_, "accl: scatter: the root needs one list of ",
                size_, " input tensors");
    for (auto& t : inputs[0]) {
      checkDense(t, name);
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
  at::Tensor out = asNccl(stageOut(outputs[0], *work));
  ncclDataType_t dt = toNccl(out.scalar_type());
  launch(work, [&](const Target& tg) {
    const Api& a = api();
    check(a.ncclGroupStart(), "ncclGroupStart");
    if (rank_ == root) {
      for (int p = 0; p < size_; ++p) check(a.ncclSend(ins[p].data_ptr(), ins[p].numel(), dt, p, tg.comm, tg.stream), name);
    }
    check(a.ncclRecv(out.data_ptr(), out.numel(), dt, root, tg.comm, tg.stream), name);
    check(a.ncclGroupEnd(), "ncclGroupEnd");
  });
  return work;
}

// A nonzero tag on CPU tensors: matched by (peer, tag) on the tag lane (tag_lane.h). CUDA
// tensors match in posting order whatever their tag, as with ProcessGroupNCCL.
c10::intrusive_ptr<c10d::Work> AcclBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  checkSingle(tensors, "send");
  checkRoot(dst, "send");
  auto work = newWork(c10d::OpType::SEND, "send", c10d::kUnsetTimeout, tensors);
  at::Tensor in = asNccl(tensors[0].contiguous());
  work->keepAlive_.push_back(in);
  if (tag != 0 && in.device().is_cpu()) {
    launchTagged(TaggedOp{work, in, dst, tag, /*send=*/true});
    return work;
  }
  launchP2P(work, [this, in, dst](const Target& tg) {
    check(api().ncclSend(in.data_ptr(), in.numel(), toNccl(in.scalar_type()), dst, tg.comm, tg.stream), "send");
  });
  if (in.device().is_cpu()) ledger_->noteSend(dst);  // a receiver from any source may be waiting for it
  return work;
}

c10::intrusive_ptr<c10d::Work> AcclBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  checkSingle(tensors, "recv");
  checkRoot(src, "recv");
  auto work = newWork(c10d::OpType::RECV, "recv", c10d::kUnsetTimeout, tensors);
  work->source_ = src;
  at::Tensor out = asNccl(stageOut(tensors[0], *work));
  if (tag != 0 && out.device().is_cpu()) {
    launchTagged(TaggedOp{work, out, src, tag, /*send=*/false});
    return work;
  }
  launchP2P(work, [this, out, src](const Target& tg) {
    check(api().ncclRecv(out.data_ptr(), out.numel(), toNccl(out.scalar_type()), src, tg.comm, tg.stream), "recv");
  });
  if (out.device().is_cpu()) ledger_->noteRecv(src);  // src's next message is this one's
  return work;
}

// The peer is found when the receive is started (flushPendingLocked, SendLedger): the first
// peer with a message to this rank that no receive here has claimed.
c10::intrusive_ptr<c10d::Work> AcclBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  checkSingle(tensors, "recv from any source");
  TORCH_CHECK(tensors[0].device().is_cpu(), "accl: recv from any source serves CPU tensors only (got ",
              tensors[0].device(), "); pass src= to dist.recv");
  TORCH_CHECK(tag == 0, "accl: recv from any source with a tag (", tag, ") is not supported; pass src= to "
              "dist.recv, or use tag 0");
  auto work = newWork(c10d::OpType::RECVANYSOURCE, "recv from any source", c10d::kUnsetTimeout, tensors);
  at::Tensor out = asNccl(stageOut(tensors[0], *work));
  AcclWork* w = work.get();  // the Work outlives the body (the pending op holds both)
  launchP2P(
      work,
      [this, out, w](const Target& tg) {
        check(api().ncclRecv(out.data_ptr(), out.numel(), toNccl(out.scalar_type()), w->source_, tg.comm, tg.stream),
              "recv from any source");
      },
      /*anySource=*/true);
  return work;
}

c10::intrusive_ptr<c10d::Work> AcclBackend::barrier(const c10d::BarrierOptions& opts) {
  std::vector<at::Tensor> t{at::zeros({1}, at::kFloat)};
  auto work = allreduceImpl(t, c10d::ReduceOp::SUM, opts.timeout, "barrier", c10d::OpType::BARRIER);
  return work;
}

// gloo's protocol, with the store as the wire: every rank but 0 announces itself and waits for
// rank 0's release; rank 0 waits for each rank in turn (all of them with waitAllRanks) within
// the timeout, then releases them. Messages as gloo's, which PyTorch's tests match. Keys are
// numbered per call, in the group's own (prefixed) store. Blocking, in the caller's thread.
void AcclBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  using namespace std::chrono;
  flushP2P();
  auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  auto start = steady_clock::now();
  auto deadline = start + timeout;
  std::string base = "accl/monitored_barrier/" + std::to_string(++monitoredBarriers_) + "/";
  auto arrivedBy = [&](const std::string& key, steady_clock::time_point until) {
    for (;;) {
      if (store_->check({key})) return true;
      if (steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(milliseconds(5));
    }
  };
  auto ms = [&] { return duration_cast<milliseconds>(steady_clock::now() - start).count(); };
  if (rank_ != 0) {
    store_->set(base + "arrived/" + std::to_string(rank_), std::vector<uint8_t>{1});
    TORCH_CHECK(arrivedBy(base + "released", deadline), "Rank ", rank_, " successfully reached monitoredBarrier, "
                "but received errors while waiting for send/recv from rank 0 (no release within ", ms(), " ms)");
    return;
  }
  std::vector<int> failed;
  for (int p = 1; p < size_; ++p) {
    if (!waitAllRanks && steady_clock::now() >= deadline && !store_->check({base + "arrived/" + std::to_string(p)}))
      TORCH_CHECK(false, "Rank 0 timed out in monitoredBarrier after ", ms(), " ms (waiting for rank ", p, ")");
    if (!arrivedBy(base + "arrived/" + std::to_string(p), deadline)) {
      failed.push_back(p);
      if (!waitAllRanks) break;
    }
  }
  if (!failed.empty()) {
    std::string list;
    for (int p : failed) list += (list.empty() ? "" : ", ") + std::to_string(p);
    TORCH_CHECK(false, failed.size() > 1 ? "Ranks " : "Rank ", list, " failed to pass monitoredBarrier in ", ms(),
                " ms");
  }
  store_->set(base + "released", std::vector<uint8_t>{1});
}

c10::intrusive_ptr<c10d::Work> AcclBackend::allreduceImpl(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& rop,
                                             std::chrono::milliseconds timeout, const char* name, c10d::OpType type) {
  if (isBitwise(rop)) return allreduceBitwise(tensors, rop, timeout, name, type);
  std::vector<Reduction> reds;
  for (auto& t : tensors) {
    checkDense(t, name);
    reds.push_back(toNccl(rop, t.scalar_type(), name));
  }
  auto work = newWork(type, name, timeout, tensors);
  std::vector<at::Tensor> bufs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor b = stageInOut(tensors[i], *work);
    if (reds[i].premul) scaleInPlace(b, reds[i]);
    bufs.push_back(asNccl(b));
  }
  launch(work, [&](const Target& tg) {
    const Api& a = api();
    if (bufs.size() > 1) check(a.ncclGroupStart(), "ncclGroupStart");
    for (size_t i = 0; i < bufs.size(); ++i) {
      at::Tensor& b = bufs[i];
      check(a.ncclAllReduce(b.data_ptr(), b.data_ptr(), b.numel(), toNccl(b.scalar_type()), reds[i].op, tg.comm,
                            tg.stream), name);
    }
    if (bufs.size() > 1) check(a.ncclGroupEnd(), "ncclGroupEnd");
  });
  return work;
}

// BAND/BOR/BXOR have no NCCL equivalent: every rank gathers every input and folds them in rank
// order (the same result on every rank). n times the memory of the input, as gloo's ring needs.
c10::intrusive_ptr<c10d::Work> AcclBackend::allreduceBitwise(std::vector<at::Tensor>& tensors,
                                                             const c10d::ReduceOp& rop,
                                                             std::chrono::milliseconds timeout, const char* name,
                                                             c10d::OpType type) {
  for (auto& t : tensors) {
    checkDense(t, name);
    TORCH_CHECK(at::isIntegralType(t.scalar_type(), /*includeBool=*/true), "accl: ", name,
                ": BAND/BOR/BXOR need integer or bool tensors, got ", t.scalar_type());
  }
  auto work = newWork(type, name, timeout, tensors);
  std::vector<at::Tensor> bufs, gathered;
  for (auto& t : tensors) {
    bufs.push_back(stageInOut(t, *work));
    gathered.push_back(at::empty({(int64_t)size_, bufs.back().numel()}, bufs.back().options()));
  }
  work->keepAlive_.insert(work->keepAlive_.end(), gathered.begin(), gathered.end());
  auto op = rop.op_;
  auto copyBack = std::move(work->post_);
  work->post_ = [bufs, gathered, op, copyBack]() mutable {
    for (size_t i = 0; i < bufs.size(); ++i) {
      at::Tensor acc = gathered[i][0].clone();
      for (int64_t p = 1; p < gathered[i].size(0); ++p) {
        if (op == c10d::ReduceOp::BAND) acc.bitwise_and_(gathered[i][p]);
        else if (op == c10d::ReduceOp::BOR) acc.bitwise_or_(gathered[i][p]);
        else acc.bitwise_xor_(gathered[i][p]);
      }
      bufs[i].view({-1}).copy_(acc);
    }
    if (copyBack) copyBack();
  };
  std::vector<at::Tensor> flatIns;
  for (auto& b : bufs) flatIns.push_back(b.view({-1}));
  launch(work, [&](const Target& tg) { allGatherEach(flatIns, gathered, name, tg); });
  return work;
}

// Sparse COO tensors (SUM, as gloo): the ranks' nonzero counts are all-gathered, then their
// indices and values padded to the largest count, and every rank sums the n sparse tensors.
// Both exchanges complete in the caller's thread; the Work returned is complete.
c10::intrusive_ptr<c10d::Work> AcclBackend::allreduceSparse(at::Tensor& t, const c10d::AllreduceOptions& opts) {
  const char* name = "allreduce (sparse)";
  TORCH_CHECK(opts.reduceOp == c10d::ReduceOp::SUM, "accl: ", name, ": sparse tensors support SUM only");
  TORCH_CHECK(t.is_cpu(), "accl: ", name, ": sparse tensors on CPU only, got ", t.device());
  auto gather = [&](const at::Tensor& in) {
    std::vector<at::Tensor> outs{at::empty({(int64_t)size_ * in.numel()}, in.options())}, ins{in.reshape({-1})};
    allgatherTensors(outs, ins, opts.timeout, name, c10d::OpType::ALLREDUCE)->wait();
    return outs[0];
  };
  at::Tensor c = t.coalesce();
  int64_t nnz = c._nnz();
  at::Tensor counts = gather(at::full({1}, nnz, at::kLong));
  int64_t most = counts.max().item<int64_t>();
  at::Tensor idx = at::zeros({c.sparse_dim(), most}, at::kLong);
  idx.narrow(1, 0, nnz).copy_(c.indices());
  at::Tensor values = c.values();  // one Tensor: its sizes() must outlive valShape's copy
  std::vector<int64_t> valShape = values.sizes().vec();
  valShape[0] = most;
  at::Tensor val = at::zeros(valShape, values.options());
  val.narrow(0, 0, nnz).copy_(values);
  at::Tensor allIdx = gather(idx).view({size_, c.sparse_dim(), most});
  valShape.insert(valShape.begin(), size_);
  at::Tensor allVal = gather(val).view(valShape);
  at::Tensor sum;
  for (int p = 0; p < size_; ++p) {
    int64_t n = counts[p].item<int64_t>();
    at::Tensor part = at::sparse_coo_tensor(allIdx[p].narrow(1, 0, n), allVal[p].narrow(0, 0, n), t.sizes());
    sum = sum.defined() ? sum + part : part;
  }
  t.copy_(sum.coalesce());
  auto work = newWork(c10d::OpType::ALLREDUCE, name, opts.timeout, {t});
  work->hostEnqueued();
  work->finish(nullptr);
  return work;
}

// Output lists (allgather, allgather_coalesced): gather into a flat buffer, then copy out.
c10::intrusive_ptr<c10d::Work> AcclBackend::allgatherLists(std::vector<std::vector<at::Tensor>>& outputs,
                                              std::vector<at::Tensor>& inputs, std::chrono::milliseconds timeout,
                                              const char* name, c10d::OpType type) {
  std::vector<at::Tensor> flatOuts, ins, all;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkDense(inputs[i], name);
    TORCH_CHECK((int)outputs[i].size() == size_, "accl: ", name, ": expected ", size_, " output tensors");
    for (auto& o : outputs[i]) {
      checkDense(o, name);
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
      int64_t n = flats[i].numel() / (int64_t)outsCopy[i].size();  // narrow, not chunk: n may be 0
      for (size_t p = 0; p < outsCopy[i].size(); ++p) {
        at::Tensor& o = outsCopy[i][p];
        asNccl(o).copy_(flats[i].narrow(0, (int64_t)p * n, n).view(asNccl(o).sizes()));
      }
    }
  };
  launch(work, [&](const Target& tg) { allGatherEach(ins, flatOuts, name, tg); });
  return work;
}

// One all-gather per input into the matching flat output, grouped when there are several.
void AcclBackend::allGatherEach(const std::vector<at::Tensor>& ins, const std::vector<at::Tensor>& outs, const char* name,
                                const Target& tg) {
  const Api& a = api();
  if (ins.size() > 1) check(a.ncclGroupStart(), "ncclGroupStart");
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].numel() == 0) continue;
    check(a.ncclAllGather(ins[i].data_ptr(), outs[i].data_ptr(), ins[i].numel(), toNccl(ins[i].scalar_type()), tg.comm,
                          tg.stream),
          name);
  }
  if (ins.size() > 1) check(a.ncclGroupEnd(), "ncclGroupEnd");
}

// Output tensors of size_ x input (all_gather_into_tensor and its coalesced form).
c10::intrusive_ptr<c10d::Work> AcclBackend::allgatherTensors(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                std::chrono::milliseconds timeout, const char* name,
                                                c10d::OpType type) {
  TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), "accl: ", name, ": inputs and outputs differ in count");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkDense(inputs[i], name);
    checkDense(outputs[i], name);
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(), "accl: ", name, ": dtype mismatch");
    TORCH_CHECK(outputs[i].numel() == (int64_t)size_ * inputs[i].numel(), "accl: ", name, ": output has ",
                outputs[i].numel(), " elements, expected group size x input = ", (int64_t)size_ * inputs[i].numel());
  }
  auto work = newWork(type, name, timeout, outputs);
  std::vector<at::Tensor> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ins.push_back(asNccl(inputs[i].contiguous()));
    outs.push_back(asNccl(stageOut(outputs[i], *work)));
  }
  work->keepAlive_.insert(work->keepAlive_.end(), ins.begin(), ins.end());
  launch(work, [&](const Target& tg) { allGatherEach(ins, outs, name, tg); });
  return work;
}

c10::intrusive_ptr<c10d::Work> AcclBackend::reduceScatterTensors(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                    const c10d::ReduceOp& rop, std::chrono::milliseconds timeout,
                                                    const char* name, c10d::OpType type,
                                                    const std::vector<at::Tensor>& userOutputs) {
  TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), "accl: ", name, ": inputs and outputs differ in count");
  std::vector<Reduction> reds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkDense(inputs[i], name);
    checkDense(outputs[i], name);
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(), "accl: ", name, ": dtype mismatch");
    TORCH_CHECK(inputs[i].numel() == (int64_t)size_ * outputs[i].numel(), "accl: ", name, ": input has ",
                inputs[i].numel(), " elements, expected group size x output = ", (int64_t)size_ * outputs[i].numel());
    reds.push_back(toNccl(rop, inputs[i].scalar_type(), name));
  }
  auto work = newWork(type, name, timeout, userOutputs);
  std::vector<at::Tensor> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor in = inputs[i].contiguous();
    if (reds[i].premul) in = scaled(in, reds[i]);
    ins.push_back(asNccl(in));
    outs.push_back(asNccl(stageOut(outputs[i], *work)));
  }
  work->keepAlive_.insert(work->keepAlive_.end(), ins.begin(), ins.end());
  launch(work, [&](const Target& tg) {
    const Api& a = api();
    if (ins.size() > 1) check(a.ncclGroupStart(), "ncclGroupStart");
    for (size_t i = 0; i < ins.size(); ++i) {
      check(a.ncclReduceScatter(ins[i].data_ptr(), outs[i].data_ptr(), outs[i].numel(),
                                toNccl(ins[i].scalar_type()), reds[i].op, tg.comm, tg.stream), name);
    }
    if (ins.size() > 1) check(a.ncclGroupEnd(), "ncclGroupEnd");
  });
  return work;
}

}  // namespace torch_accl
