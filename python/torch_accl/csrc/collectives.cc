// collectives.cc: the c10d ops of the "accl" backend. Each checks its tensors, stages what NCCL
// cannot use in place, and hands its NCCL calls to launch() (backend.cc), which runs them on the
// host stream (CPU tensors) or the group's side stream on the tensors' GPU (CUDA tensors).
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

c10::intrusive_ptr<c10d::Work> AcclBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "accl: allgather_coalesced: ", outputs.size(),
              " output lists for ", inputs.size(), " inputs");
  return allgatherLists(outputs, inputs, opts.timeout, "allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED);
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

c10::intrusive_ptr<c10d::Work> AcclBackend::send(std::vector<at::Tensor>& tensors, int dst, int /*tag*/) {
  checkSingle(tensors, "send");
  checkRoot(dst, "send");
  auto work = newWork(c10d::OpType::SEND, "send", c10d::kUnsetTimeout, tensors);
  at::Tensor in = asNccl(tensors[0].contiguous());
  work->keepAlive_.push_back(in);
  launch(work, [&](const Target& tg) {
    check(api().ncclSend(in.data_ptr(), in.numel(), toNccl(in.scalar_type()), dst, tg.comm, tg.stream), "send");
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> AcclBackend::recv(std::vector<at::Tensor>& tensors, int src, int /*tag*/) {
  checkSingle(tensors, "recv");
  checkRoot(src, "recv");
  auto work = newWork(c10d::OpType::RECV, "recv", c10d::kUnsetTimeout, tensors);
  at::Tensor out = asNccl(stageOut(tensors[0], *work));
  launch(work, [&](const Target& tg) {
    check(api().ncclRecv(out.data_ptr(), out.numel(), toNccl(out.scalar_type()), src, tg.comm, tg.stream), "recv");
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> AcclBackend::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false, "accl: recv from any source is not supported (NCCL point-to-point needs the "
              "source rank); pass src= to dist.recv");
}

c10::intrusive_ptr<c10d::Work> AcclBackend::barrier(const c10d::BarrierOptions& opts) {
  std::vector<at::Tensor> t{at::zeros({1}, at::kFloat)};
  auto work = allreduceImpl(t, c10d::ReduceOp::SUM, opts.timeout, "barrier", c10d::OpType::BARRIER);
  return work;
}

c10::intrusive_ptr<c10d::Work> AcclBackend::allreduceImpl(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& rop,
                                             std::chrono::milliseconds timeout, const char* name, c10d::OpType type) {
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
      auto chunks = flats[i].chunk((int64_t)outsCopy[i].size());
      for (size_t p = 0; p < outsCopy[i].size(); ++p) {
        at::Tensor& o = outsCopy[i][p];
        asNccl(o).copy_(chunks[p].view(asNccl(o).sizes()));
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
