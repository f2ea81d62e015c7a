// collective_args.h: what one launch of the collective kernel (kernels/collective_kernel.h) is
// told, shared by the host code that builds it (src/sched/device_collective.cc) and the kernel.
// Plain data passed by value as the kernel's only parameter, so a captured launch carries it
// into every replay; everything that changes from call to call on the device (how many chunks
// went to each peer so far) lives in the ranks' mailboxes, not here.
//
// The mailbox: every rank of a communicator whose ranks all reach each other's device memory
// owns one, in device memory it exports (CUDA IPC; the pointer itself inside one process):
//
//   [MailboxHeader][slot data: for each source rank s, channel c, slot k: kChunkBytes]
//
// A sender writes chunk g of its stream to rank d on channel c into d's mailbox, slot
// (s=sender, c, g % kSlots), then publishes d.posted[s][c] = g + 1 (release). The receiver
// waits for that, uses the slot, and publishes sender.freed[d][c] = g + 1 in the sender's
// mailbox; the sender reuses a slot only once freed says the chunk kSlots before it is done.
// posted/freed count whole chunks and only grow, across calls and graph replays: nothing is
// reset per launch. A task may run on several blocks (KTask::blocks), which split every chunk
// (thread i of the task's blocks takes every (blocks * blockSize())-th 16-byte pack); each block
// that is done with its share of chunk j arrives at the task's counter (arrivals[task]), and the
// block whose arrival completes the chunk publishes it (posted, freed, folded). A block arrives
// at chunk j only once every block arrived at chunk j-1, so the counter says which chunk is whole.
// The streams' positions (sent/consumed) stay fixed while a launch runs (every block of a task
// starts from them); the rank's last block to end moves them on by the chunks the launch moved,
// and sets the per-launch counters (arrivals, folded, sentChunks, blocksDone) back to 0 for the
// next launch, so the host queues nothing but the launch itself.
//
// Peers reached only through the network (ranks on other hosts, every peer with
// NCCL_P2P_DISABLE=1, and ranks of this host whose devices cannot reach each other) have no
// mailbox here. A rank's kernel then talks to its own proxy box,
// pinned host memory mapped for the device (src/comm/net_proxy.h): a send fills an out slot
// for the peer and posts it; the rank's proxy thread hands the slot to the network connection
// and frees it. The peer's proxy writes what arrives into an in slot of the peer's box and
// posts it; the peer's kernel uses it and frees it. Same counters, same rules, both local:
// the network connection in between carries the flow control across hosts.
#pragma once
#include <cstddef>
#include <cstdint>

namespace accl::kern {

constexpr int kMailboxRanks = 16;      // ranks of a communicator that the kernel path serves
constexpr int kChannels = 2;           // per ordered pair of ranks: two independent streams
constexpr int kSlots = 4;              // chunks in flight per channel
constexpr size_t kChunkBytes = 128 << 10;
constexpr int kMaxTasks = 48;
constexpr int kMaxSegments = 64;
// Threads per block of the collective kernel: the launch's (CollKernelArgs::threads), a multiple
// of 64 up to kMaxCollThreads (what the resident-block check at set-up assumes).
constexpr unsigned kMaxCollThreads = 512;
// Blocks one task may run on, and all blocks of one launch (every rank's tasks in it).
constexpr int kMaxTaskBlocks = 16;
constexpr int kMaxLaunchBlocks = kMaxTasks;

// A call's fingerprint (transports/call_stamp.h's CallStamp, the same 24 bytes): the sender of
// a chunk puts its call's next to the chunk (a sends' count is its byte count and its root
// the sender), the receiver compares it with its own before it uses the chunk. magic 0: calls
// carry no stamps (ACCL_CHECK_MISMATCH=0 or 2).
struct KStamp {
  uint32_t magic;
  uint32_t seq;
  uint64_t count;
  int32_t root;
  uint8_t kind, type, red, flags;
};
static_assert(sizeof(KStamp) == 24, "call stamp");

// What a rank's direct kernel publishes for its peers (MailboxHeader::direct): its buffers of
// this call and what the call is, which every peer compares with its own before it touches them.
struct DirectPost {
  const char* send;
  char* recv;
  uint64_t count;
  KStamp stamp;
  uint8_t kind, type, red, scaled;  // scaled: the contribution is multiplied by `scalar` (PreMulSum)
  int32_t root;                     // broadcast, reduce; -1 otherwise
  alignas(8) unsigned char scalar[8];
};

struct MailboxHeader {
  uint64_t posted[kMailboxRanks][kChannels];    // written by the sender s: chunks it put in my slots
  uint64_t freed[kMailboxRanks][kChannels];     // written by the receiver d: chunks of mine it is done with
  uint64_t sent[kMailboxRanks][kChannels];      // mine: chunks I have sent to d so far
  uint64_t consumed[kMailboxRanks][kChannels];  // mine: chunks of s I have used so far
  // Per launch (0 when it starts; the rank's last block to end sets them back to 0): chunks the
  // fold task finished, chunks the channel-0 send task to each peer has posted (an in-place
  // fold overwrites its input only after), each task's block arrivals (by task index in the
  // launch) and the rank's blocks that ended.
  uint64_t folded[kChannels];
  uint64_t sentChunks[kMailboxRanks];
  uint64_t arrivals[kMaxTasks];
  uint64_t blocksDone;
  // Set by rank r (non-zero) once it has unmapped this mailbox at ncclCommDestroy: the owner
  // frees it only then (freeing exported memory a peer still has open is undefined behaviour).
  uint64_t closedBy[kMailboxRanks];
  // Written by the sender s with each chunk, before it posts it: the stamp of its call.
  KStamp stamps[kMailboxRanks][kChannels][kSlots];
  // The collective this rank's latest launch is in, for a peer that waits on it to compare with
  // its own (a seqlock: callWord is 0 while `call` is being written, else its call number + 1).
  // Catches calls that send nothing to the rank that would check the stamps (roots that differ).
  uint64_t callWord;
  KStamp call;
  // --- The direct path (kernels/direct_kernel.h, direct_args.h): peers use this rank's user
  // buffers in place. Counters only grow across calls and replays; zeroStreams clears them.
  uint64_t directCalls;    // mine: direct calls this rank's kernels have finished
  uint64_t directArrived;  // mine: blocks of the running direct launch done with their part
  uint64_t directReady;    // mine: the direct call whose `direct` below is published
  uint64_t directDone;     // mine: the direct call whose work on every peer's buffers I finished
  DirectPost direct;
  // Ranks of a launch that carries several (LaunchDone::ranks > 1) whose last block has ended,
  // counted in the lead rank's header; the last of them sets it back to 0.
  uint64_t ranksEnded;
  // --- The LL path (kernels/ll_kernel.h): LL calls this rank's kernels have finished (the
  // next one's number gives its lines' flag and its region). Grows; zeroStreams clears it.
  uint64_t llCalls;
};
constexpr size_t kMailboxHeaderBytes = 8192;
static_assert(sizeof(MailboxHeader) <= kMailboxHeaderBytes, "mailbox header");

// The LL path (kernels/ll_kernel.h): calls whose largest buffer is at most kLlMaxBytes go in one
// pass of 16-byte lines, each [4 data bytes | flag | 4 data bytes | flag], written with one
// store and polled by the receiver. Every (receiver, sender) pair has two regions in the
// receiver's mailbox, after the slots, used by calls of alternate parity; a region holds
// kLlHeaderLines lines saying what the sender's call is, then the data (8 bytes a line).
constexpr size_t kLlMaxBytes = 64 << 10;
constexpr int kLlHeaderLines = 4;
constexpr size_t kLlLineBytes = 16;
constexpr size_t kLlRegionBytes = (kLlHeaderLines + kLlMaxBytes / 8) * kLlLineBytes;

constexpr size_t slotsEnd(int nranks) {
  return kMailboxHeaderBytes + static_cast<size_t>(nranks) * kChannels * kSlots * kChunkBytes;
}
constexpr size_t llOffset(int nranks, int sender, uint64_t call) {
  return slotsEnd(nranks) + (static_cast<size_t>(sender) * 2 + call % 2) * kLlRegionBytes;
}
constexpr size_t llRegionsBytes(int nranks) { return static_cast<size_t>(nranks) * 2 * kLlRegionBytes; }
constexpr size_t mailboxBytes(int nranks) { return slotsEnd(nranks) + llRegionsBytes(nranks); }
constexpr size_t slotOffset(int src, int ch, uint64_t chunk) {
  return kMailboxHeaderBytes + ((static_cast<size_t>(src) * kChannels + ch) * kSlots + chunk % kSlots) * kChunkBytes;
}

struct ProxyHeader {
  uint64_t outPosted[kMailboxRanks][kChannels];  // kernel: chunks it put in out slots for peer p
  uint64_t outFreed[kMailboxRanks][kChannels];   // proxy: chunks it handed to the connection
  uint64_t inPosted[kMailboxRanks][kChannels];   // proxy: chunks of peer p it put in in slots
  uint64_t inFreed[kMailboxRanks][kChannels];    // kernel: chunks of p it is done with
  // kernel: chunks of p it waits for (the proxy reads the connection only for them, so a peer
  // that destroyed its communicator is an error only when a kernel still needs it, as on the host)
  uint64_t inWanted[kMailboxRanks][kChannels];
  uint64_t outBytes[kMailboxRanks][kChannels][kSlots];  // kernel: bytes in each out slot
  KStamp outStamp[kMailboxRanks][kChannels][kSlots];    // kernel: the call stamp of each out slot
  KStamp inStamp[kMailboxRanks][kChannels][kSlots];     // proxy: the stamp that came with each in slot
  // kernel: the collective this rank's latest launch is in (as MailboxHeader::callWord/call),
  // which the proxy announces to a peer whose data the kernel has waited for a while.
  uint64_t callWord;
  KStamp call;
  // proxy: the call each peer announced last (the same seqlock, per peer). A kernel waiting for
  // a peer through the proxy compares its call with it, as with a mailbox peer's header: two
  // ranks that wait for each other in different calls (reduce roots that differ) learn it.
  uint64_t peerCallWord[kMailboxRanks];
  KStamp peerCall[kMailboxRanks];
};
constexpr size_t kProxyHeaderBytes = 16384;
static_assert(sizeof(ProxyHeader) <= kProxyHeaderBytes, "proxy header");

// Out slots for every peer, then in slots for every peer, indexed by peer rank.
constexpr size_t proxyBoxBytes(int nranks) {
  return kProxyHeaderBytes + 2 * static_cast<size_t>(nranks) * kChannels * kSlots * kChunkBytes;
}
constexpr size_t proxyOutOffset(int peer, int ch, uint64_t chunk) {
  return kProxyHeaderBytes + ((static_cast<size_t>(peer) * kChannels + ch) * kSlots + chunk % kSlots) * kChunkBytes;
}
constexpr size_t proxyInOffset(int nranks, int peer, int ch, uint64_t chunk) {
  return proxyOutOffset(peer, ch, chunk) + static_cast<size_t>(nranks) * kChannels * kSlots * kChunkBytes;
}

// A run of bytes a task moves: Send reads src, Recv writes dst, Copy both; Fold reads src (this
// rank's contribution) and writes dst. With foldWait, a Send segment's chunk i is sent only
// once the fold task of this launch has written its chunk i (the all-reduce's second half).
struct KSegment {
  const char* src;
  char* dst;
  uint64_t bytes;
  uint32_t foldWait;  // Send: 1 + the channel whose fold progress gates it; 0: none. Fold:
                      // 1 = in place: chunk i is written only once every send of it is out
  uint32_t scaled;    // Send: multiply each element by the launch's scalar (PreMulSum) while sending
};

enum class TaskKind : uint8_t { Send, Recv, Copy, Fold };

// One task per `blocks` blocks (consecutive in the grid, in task order). Send/Recv: the stream to/from `peer` on channel `ch`, segment after
// segment (chunks never span two segments; the peer splits its side identically). Copy: local.
// Fold: one segment; each chunk is every rank's contribution folded in rank order (this rank's
// from the segment's src, the others' from their slots on channel `ch`), written to dst.
struct KTask {
  TaskKind kind;
  uint8_t ch;
  int16_t peer;
  int16_t rank;  // whose task: one launch may carry several ranks of a communicator that one
                 // thread queued on one stream in one group (they could not wait for each other)
  uint16_t firstSegment;
  uint16_t segments;
  uint16_t blocks;  // 1..kMaxTaskBlocks
};

enum class ScalarKind : uint8_t { None, Immediate, Device };

// What a kernel that gave up (ACCL_TIMEOUT) writes for the host, in mapped host memory: the
// first one to time out wins (code goes 0 -> kReportTimedOut last, after the other words).
// A mismatch also leaves both stamps (3 words each): the rank's call and what the peer sent.
enum ReportWord {
  kReportCode, kReportRank, kReportPeer, kReportWhat, kReportChannel, kReportChunk,
  kReportMine, kReportTheirs = kReportMine + 3, kReportWords = kReportTheirs + 3
};
constexpr uint64_t kReportTimedOut = 1;
constexpr uint64_t kReportMismatch = 2;
// kReportWhat: what the kernel waited for.
enum WaitWhat : uint64_t { kWaitPeerData = 1, kWaitPeerSpace = 2, kWaitOwnFold = 3, kWaitOwnSend = 4, kWaitOwnBlocks = 5 };

// Where a launch says the device has run it (src/comm/launch_order.h): each rank's word of
// mapped host memory (written only by that rank's kernels) holds the number of the rank's last
// launch that ended. The host polls it instead of an event, and a launch of the rank on another
// stream waits for it with one stream memory wait instead of an event record per call. The
// launch's last block to end (of every rank it carries) stores it, with a system-scope
// release, after the mailbox counters are set back: a launch that waits for it finds them so.
struct LaunchDone {
  uint64_t* word[kMailboxRanks];  // [rank]: its word (device address); null: not counted
  // [rank]: the low 32 bits of the launch's number (4 KiB of arguments leave no room for 64):
  // the kernel widens it against the word, which holds the rank's previous launch's number,
  // as the rank's launches run one after the other and each is numbered past the last.
  uint32_t seq[kMailboxRanks];
  int32_t ranks;  // words set (0: a captured launch, which says nothing: see launch_order.h)
  int32_t lead;   // ranks > 1: the rank whose MailboxHeader::ranksEnded counts the ranks that ended
};

struct CollKernelArgs {
  int32_t nranks;
  int32_t ntasks;
  // The launch's geometry, chosen by the host (src/sched/device_grid.h): blocks (the tasks'
  // blocks summed) and threads per block. The kernel reads its own with gridSize()/blockSize().
  uint32_t nblocks;
  uint32_t threads;
  // [rank]: the stamp of that rank's call in this launch; p2p: the launch is a group's sends
  // and receives (each chunk's stamp then counts its segment's bytes and names its sender).
  KStamp stamp[kMailboxRanks];
  uint32_t p2p;
  // Fold: every rank contributes; the result is divided by `divisor` when > 1 (ncclAvg).
  // PreMulSum: rank r's local contribution (and its Send segments marked scaled) multiplied by
  // its scalar: immediate bytes here, or read from device memory when the kernel runs.
  uint32_t divisor;
  ScalarKind scalarKind[kMailboxRanks];
  alignas(8) unsigned char scalarBytes[kMailboxRanks][8];
  const void* scalarPtr[kMailboxRanks];
  // Every rank's mailbox as this process reaches it ([rank]: its own), and a word in mapped
  // host memory that the host sets to make waiting kernels give up (abort, a failed peer).
  char* mailbox[kMailboxRanks];
  // [rank]: that rank's proxy box (device address), for ranks of this launch that have peers
  // they reach through the network; viaNet[rank][peer]: the peer is one of those (another host,
  // NCCL_P2P_DISABLE=1, or a device of this host that the rank's device cannot reach). The same
  // for both ranks of a pair.
  char* proxyBox[kMailboxRanks];
  uint8_t viaNet[kMailboxRanks][kMailboxRanks];
  const uint64_t* abortFlag;
  // ACCL_TIMEOUT: a wait that sees no progress for this long gives up and says why in the
  // report (mapped host memory the host reads); 0 waits like NCCL, until aborted.
  uint64_t timeoutNs;
  uint64_t* report;
  KTask tasks[kMaxTasks];
  KSegment segments[kMaxSegments];
  LaunchDone done;
};
// CUDA allows 4 KiB of kernel parameters on every architecture the fatbin targets.
static_assert(sizeof(CollKernelArgs) <= 4096, "collective kernel arguments must fit CUDA's parameter space");

}  // namespace accl::kern
