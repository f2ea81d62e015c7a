// step.h: the unit of a plan. An algorithm turns an operation into a sequence of steps for
// one rank; steps name peers, local buffers and byte counts, never transports, so plans can
// be generated and tested on their own. The executor moves each step forward chunk by chunk
// as the channels allow.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include "device.h"

namespace accl {

struct Step {
  enum class Kind : uint8_t {
    Send,            // src -> peer
    Recv,            // peer -> dst
    RecvReduce,      // dst = src OP (from peer); with recvFirst: dst = (from peer) OP src
    RecvReduceSend,  // out = src OP (from recvPeer); out -> sendPeer; dst (optional) = out
    RecvCopySend,    // (from recvPeer) -> sendPeer; dst (optional) = received
    Copy,            // dst = src (local)
    Scale,           // dst = src * scalar (PreMulSum input scaling)
    Divide,          // dst = src / divisor (average)
    Accumulate,      // dst = dst OP src (local; the accumulator is the left operand)
    BoardReduce,     // post src on the board; dst = every rank's post reduced, in rank order
    BoardGather,     // post src on the board; dst + r * bytes = rank r's post
    BoardReadGather, // post where src lies; dst + r * bytes = rank r's src, read in its process
    BoardSliceReduce,// post src on the board; reduce this rank's slice of every post, publish it, gather the others'
  };
  Kind kind = Kind::Copy;
  ncclDataType_t type = ncclInt8;
  dev::RedKind op = dev::RedKind::Sum;
  int sendPeer = -1;
  int recvPeer = -1;
  const char* src = nullptr;
  char* dst = nullptr;
  size_t bytes = 0;
  const void* scalar = nullptr;  // Scale
  int divisor = 1;               // Divide
  bool streamDst = false;        // write dst with non-temporal stores (large outputs)
  bool recvFirst = false;        // RecvReduce: the received data is the left operand (rank order)
};

// Produces a rank's steps lazily, so a 128 MiB ring does not materialise thousands of steps.
class StepSource {
 public:
  virtual ~StepSource() = default;
  // Fills *out with the next step; false when the plan is finished.
  virtual bool next(Step* out) = 0;
};

}  // namespace accl
