// Which ops write their output with non-temporal stores (sched/planner.h streamsOutput).
// A reduction whose output is its input must not: the rank reads each piece of the buffer just
// before it writes the result there, so the lines are in its cache, and a streaming store would
// first have to evict them (measured: in-place 16-128 MiB all-reduce np2 ran 1.2-1.6x slower
// than out-of-place).
#include <gtest/gtest.h>
#include <vector>
#include "sched/planner.h"

namespace accl {
namespace {

constexpr size_t kBig = size_t{64} << 20;  // well above ACCL_STREAM_OUTPUT_BYTES' default (8 MiB)

OpDesc op(OpKind kind, const void* send, void* recv, size_t count) {
  OpDesc d;
  d.kind = kind;
  d.sendbuff = send;
  d.recvbuff = recv;
  d.count = count;
  d.type = ncclUint8;
  return d;
}

TEST(StreamOutput, LargeOutOfPlaceReductionsStream) {
  std::vector<char> in(kBig), out(kBig);
  EXPECT_TRUE(streamsOutput(op(OpKind::AllReduce, in.data(), out.data(), kBig), 2));
  EXPECT_TRUE(streamsOutput(op(OpKind::Reduce, in.data(), out.data(), kBig), 2));
  EXPECT_TRUE(streamsOutput(op(OpKind::ReduceScatter, in.data(), out.data(), kBig / 2), 2));
}

TEST(StreamOutput, SmallOutputsStayCached) {
  std::vector<char> in(4096), out(4096);
  EXPECT_FALSE(streamsOutput(op(OpKind::AllReduce, in.data(), out.data(), 4096), 2));
}

TEST(StreamOutput, InPlaceReductionsStayCached) {
  std::vector<char> buf(kBig);
  EXPECT_FALSE(streamsOutput(op(OpKind::AllReduce, buf.data(), buf.data(), kBig), 2));
  EXPECT_FALSE(streamsOutput(op(OpKind::Reduce, buf.data(), buf.data(), kBig), 4));
  // In-place reduce-scatter (rank 1 of 4): the output is this rank's block of the input.
  EXPECT_FALSE(streamsOutput(op(OpKind::ReduceScatter, buf.data(), buf.data() + kBig / 4, kBig / 4), 4));
}

TEST(StreamOutput, InPlaceGathersStillStream) {
  // An in-place all-gather never rewrites what it read (its own block is skipped), and a
  // broadcast's non-roots never read their buffer: the blocks they write are not in cache.
  std::vector<char> buf(kBig);
  EXPECT_TRUE(streamsOutput(op(OpKind::AllGather, buf.data() + kBig / 2, buf.data(), kBig / 2), 2));
  EXPECT_TRUE(streamsOutput(op(OpKind::Broadcast, buf.data(), buf.data(), kBig), 2));
}

}  // namespace
}  // namespace accl
