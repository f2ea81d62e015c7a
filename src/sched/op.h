// op.h: one validated API call, as recorded by the group machinery.
#pragma once
#include <memory>
#include "comm/comm.h"
#include "device.h"

namespace accl {

enum class OpKind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, Send, Recv };
const char* opKindName(OpKind k);

struct OpDesc {
  OpKind kind = OpKind::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  dev::RedKind red = dev::RedKind::Sum;
  bool avg = false;
  bool preMul = false;
  alignas(8) unsigned char scalar[8] = {};  // PreMulSum, host-immediate
  const void* deviceScalar = nullptr;       // PreMulSum, read when the op runs
  int root = -1;                            // root, or peer for Send/Recv
  std::shared_ptr<Comm> comm;
  cudaStream_t stream = nullptr;
};

}  // namespace accl
