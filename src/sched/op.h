// op.h: one validated API call, as recorded by the group machinery.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "comm/comm.h"
#include "device.h"
#include "device/backend.h"
#include "transports/call_stamp.h"

namespace accl {

enum class OpKind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, Send, Recv };
const char* opKindName(OpKind k);
// The kinds that fold their inputs with a reduction operator (and so take `op`, PreMulSum, avg).
constexpr bool opReduces(OpKind k) {
  return k == OpKind::AllReduce || k == OpKind::Reduce || k == OpKind::ReduceScatter;
}
// "AllReduce(1000 x float32, sum)", "Broadcast(8 x int32, root 2)", "Send(4 x float32, peer 1)":
// how logs and mismatch errors name a call.
std::string describeCall(OpKind kind, size_t count, ncclDataType_t type, dev::RedKind red, bool avg, bool preMul,
                         int root);

// The argument a call was refused for (api/coll_api.cc); carried by the refused call's void
// stand-in (OpDesc::refused) so that the peers' matching call fails naming it.
enum class RefusedArg : uint8_t { None, Datatype, Count, Root, Op, SendBuff, RecvBuff, Overlap, Buffer };
const char* refusedArgName(RefusedArg a);

struct OpDesc;
// The streams of `ops` other than the first op's, each once, in order of first use: they wait
// for the first one before the ops' work and it for them after (one work, several streams).
std::vector<dev::StreamRef> otherStreams(const std::vector<std::unique_ptr<OpDesc>>& ops);

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
  int root = -1;                            // rooted collectives; -1 otherwise
  int peer = -1;                            // Send/Recv; -1 otherwise
  std::shared_ptr<Comm> comm;
  dev::StreamRef stream;  // resolved by the communicator's backend
  // What it sends in front of its data and checks in front of its peers' (sched/call_stamp.h);
  // magic 0 when calls carry no stamps.
  CallStamp stamp;
  // A collective refused on this rank for its arguments: a void call that moves no data but
  // keeps its place in the call sequence (its peers' matching call fails naming `refused`).
  RefusedArg refusedArg = RefusedArg::None;
  std::string refused;
  bool isP2p() const { return kind == OpKind::Send || kind == OpKind::Recv; }
  std::string describe() const { return describeCall(kind, count, type, red, avg, preMul, isP2p() ? peer : root); }
};

}  // namespace accl
