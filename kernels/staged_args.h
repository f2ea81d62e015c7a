// staged_args.h: what one launch of the staged kernel (kernels/staged_kernel.h) is told, shared
// by the host code that builds it (src/sched/staged_launch.cc) and the kernel.
//
// The staged path serves communicators the collective kernel cannot (more ranks than its
// mailboxes hold, kMailboxRanks): the caller's stream still runs one kernel per call, and that
// kernel still waits only for a host thread that makes no device call, but the data crosses
// between ranks on the host. Each rank owns a staging box of pinned, device-mapped host memory:
//
//   [StagedBoxHeader, kStagedHeaderBytes][data, kStagedDataBytes]
//
// A call is cut into rounds. In round i the kernel copies the round's part of every input
// segment into the data area (one after the other, in segment order), then posts the round
// (call, round, then posted + 1); the rank's staged proxy (comm/staged_path.h) runs the call's
// collectives for that round on the data area through a host communicator of the same ranks
// (shared memory, sockets, IB: every algorithm of the host path), then sets done = posted; the
// kernel copies the round's part of every output segment back to user memory. posted and done
// only grow, across calls and graph replays.
#pragma once
#include <cstddef>
#include <cstdint>

namespace accl::kern {

constexpr size_t kStagedHeaderBytes = 4096;
constexpr size_t kStagedDataBytes = 8 << 20;
constexpr int kStagedSegments = 160;
constexpr unsigned kStagedThreads = 512;

struct StagedBoxHeader {
  uint64_t posted;  // kernel: rounds it posted, over every call
  uint64_t done;    // proxy: rounds it finished (a failed one too, with failed set)
  uint64_t call;    // kernel: the host's number of the call the posted round is of (set first)
  uint64_t round;   // kernel: which round of that call
  uint64_t failed;  // proxy: non-zero once a round failed; every later round fails at once
  uint64_t verdict; // kernel: thread 0 tells the block the round it waited for went well (its seq)
  // kernel: PreMulSum's scalar when it lives in device memory, copied before each round
  alignas(8) unsigned char scalar[8];
};
static_assert(sizeof(StagedBoxHeader) <= kStagedHeaderBytes, "staged box header");

// A run of user memory the kernel moves, in `blocks` pieces of `bytes` each, laid out one after
// the other in user memory (an all-gather's output: one piece per rank). Round i moves bytes
// [i * roundBytes, +roundBytes) of every piece; in the data area the round's pieces follow each
// other (each as long as the round's part), after the earlier segments' parts.
struct StagedSegment {
  char* dev;            // user memory, as the kernel reaches it
  uint64_t bytes;       // of one piece
  uint32_t roundBytes;  // of one piece per round (a multiple of the element size)
  uint16_t blocks;
  uint8_t toStage;      // 1: user memory -> data area before the round; 0: back after it
  uint8_t pad;
};
static_assert(sizeof(StagedSegment) == 24, "staged segment");

// What one round moves of a segment's piece.
constexpr uint64_t stagedRoundPart(const StagedSegment& s, uint64_t round) {
  const uint64_t first = round * s.roundBytes;
  return first >= s.bytes ? 0 : (s.bytes - first < s.roundBytes ? s.bytes - first : s.roundBytes);
}

struct StagedArgs {
  char* box;                  // the rank's staging box, as the kernel reaches it
  const uint64_t* abortFlag;  // the host sets it to make a waiting kernel give up
  uint64_t* report;           // kReportWords words, as for the collective kernel
  const void* scalarPtr;      // PreMulSum's device scalar (null: none)
  uint64_t timeoutNs;         // ACCL_TIMEOUT; 0 waits like NCCL, until aborted
  uint64_t call;              // the host's number for this call (the proxy's table)
  uint32_t rounds;
  uint32_t nseg;
  uint32_t rank;              // for the report
  uint32_t scalarBytes;
  StagedSegment seg[kStagedSegments];
};
static_assert(sizeof(StagedArgs) <= 4096, "staged kernel arguments must fit CUDA's parameter space");

}  // namespace accl::kern
