// collective_kernel.h: the collective kernel, written once (portable.h): one launch on the
// caller's stream runs this rank's whole share of a collective or of a group's sends and
// receives, moving the data itself through the ranks' mailboxes (collective_args.h says how they
// are laid out and how the flags keep flow control). Each task runs on one or more blocks
// (KTask::blocks, chosen by the host's grid tuner) that split its chunks; tasks of one launch
// run at the same time, so a rank sends to every peer while it receives from every peer
// and nothing waits on anything but another rank's kernel or a block of its own launch.
// Fold tasks combine every rank's contribution in rank order, narrowing after every operation,
// which gives the host backend's ACCL_DETERMINISTIC=1 bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include "block_ops.h"
#include "collective_args.h"
#include "host/element_types.h"
#include "kernel_family.h"
#include "launch_done.h"
#include "portable.h"

namespace accl::kern::coll {

using namespace accl::dev::host;

ACCL_DEV MailboxHeader* header(const CollKernelArgs& a, int rank) {
  return devicePointer(reinterpret_cast<MailboxHeader*>(a.mailbox[rank]));
}

ACCL_DEV ProxyHeader* proxy(const CollKernelArgs& a, int rank) {
  return devicePointer(reinterpret_cast<ProxyHeader*>(a.proxyBox[rank]));
}

// One chunk's place in a stream between two ranks: its slot, the counter that says it is
// there (posted) and the one that says the receiving side is done with it (freed).
struct Link {
  char* slot;
  uint64_t* posted;
  uint64_t* freed;
  KStamp* stamp;  // the call stamp that goes with the chunk
};

// Chunk g of `rank`'s stream to `peer` on channel ch: in the peer's mailbox, or in an out slot
// of the rank's own proxy box when the peer is reached through the network.
ACCL_DEV Link outgoing(const CollKernelArgs& a, int rank, int peer, int ch, uint64_t g) {
  if (a.viaNet[rank][peer]) {
    ProxyHeader* h = proxy(a, rank);
    return {devicePointer(a.proxyBox[rank] + proxyOutOffset(peer, ch, g)), &h->outPosted[peer][ch],
            &h->outFreed[peer][ch], &h->outStamp[peer][ch][g % kSlots]};
  }
  return {devicePointer(a.mailbox[peer] + slotOffset(rank, ch, g)), &header(a, peer)->posted[rank][ch],
          &header(a, rank)->freed[peer][ch], &header(a, peer)->stamps[rank][ch][g % kSlots]};
}

// Chunk g of `peer`'s stream to `rank` on channel ch: in the rank's mailbox, or in an in slot of
// its proxy box (the proxy put it there; asking for it tells the proxy it is wanted).
ACCL_DEV Link incoming(const CollKernelArgs& a, int rank, int peer, int ch, uint64_t g) {
  if (a.viaNet[rank][peer]) {
    ProxyHeader* h = proxy(a, rank);
    if (threadIndex() == 0 && loadAcquire(&h->inWanted[peer][ch]) < g + 1) storeRelease(&h->inWanted[peer][ch], g + 1);
    return {devicePointer(a.proxyBox[rank] + proxyInOffset(a.nranks, peer, ch, g)), &h->inPosted[peer][ch],
            &h->inFreed[peer][ch], &h->inStamp[peer][ch][g % kSlots]};
  }
  return {devicePointer(a.mailbox[rank] + slotOffset(peer, ch, g)), &header(a, rank)->posted[peer][ch],
          &header(a, peer)->freed[rank][ch], &header(a, rank)->stamps[peer][ch][g % kSlots]};
}

// The stamp of `sender`'s call for chunks of a segment of `bytes` (a group's sends and
// receives: each send's own size and sender, as both sides split them alike).
ACCL_DEV KStamp stampOf(const CollKernelArgs& a, int rank, int sender, uint64_t bytes) {
  KStamp s = a.stamp[rank];
  if (a.p2p) {
    s.count = bytes;
    s.root = sender;
  }
  return s;
}

ACCL_DEV void putStamp(uint64_t* words, const KStamp& s) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(&s);
  for (int w = 0; w < 3; w++) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[w * 8 + i];
    words[w] = v;
  }
}

// What a wait is for, for the report when it times out.
struct WaitFor {
  int rank, peer, ch;
  WaitWhat what;
  uint64_t chunk;
};

// Thread 0 of the first block of this process to give up claims the report and says what it
// waited for (the caller then adds its own words and sets the code); null for everyone else.
ACCL_DEV uint64_t* claimReport(const CollKernelArgs& a, const WaitFor& w) {
  uint64_t* report = a.report ? devicePointer(a.report) : nullptr;
  if (!report || threadIndex() != 0 || !claimOnce(&report[kReportRank], static_cast<uint64_t>(w.rank) + 1))
    return nullptr;
  report[kReportPeer] = static_cast<uint64_t>(w.peer);
  report[kReportWhat] = w.what;
  report[kReportChannel] = static_cast<uint64_t>(w.ch);
  report[kReportChunk] = w.chunk;
  return report;
}

ACCL_DEV bool sameStamp(const KStamp& x, const KStamp& y) {
  return x.magic == y.magic && x.seq == y.seq && x.count == y.count && x.root == y.root && x.kind == y.kind &&
         x.type == y.type && x.red == y.red && x.flags == y.flags;
}

// The call a seqlock (word, stamp) holds when the word says call number `seq`, into *out;
// false when it says another call or changed while being read.
ACCL_DEV bool readCall(const uint64_t* wordAt, const volatile KStamp* p, uint32_t seq, KStamp* out) {
  const uint64_t word = loadAcquire(wordAt);
  if (word != static_cast<uint64_t>(seq) + 1) return false;
  out->magic = p->magic;
  out->seq = p->seq;
  out->count = p->count;
  out->root = p->root;
  out->kind = p->kind;
  out->type = p->type;
  out->red = p->red;
  out->flags = p->flags;
  fenceSystem();  // the fields were read before the word is read again
  return loadAcquire(wordAt) == word;
}

// Writes `s` into a seqlock (word, stamp) for readCall.
ACCL_DEV void publishCall(uint64_t* wordAt, KStamp* at, const KStamp& s) {
  storeRelease(wordAt, 0);
  fenceSystem();  // readers see the 0 before any field changes
  *at = s;
  storeRelease(wordAt, static_cast<uint64_t>(s.seq) + 1);
}

// The call `peer` is in, as far as `rank` can see it, when it has call number `seq`: a mailbox
// peer's launch published it in its mailbox header; a peer reached through the proxies
// announced it to this rank's proxy (which it does for the peers whose data it waits for).
ACCL_DEV bool callOfPeer(const CollKernelArgs& a, int rank, int peer, uint32_t seq, KStamp* out) {
  if (a.viaNet[rank][peer]) {
    if (a.proxyBox[rank] == nullptr) return false;
    ProxyHeader* h = proxy(a, rank);
    return readCall(&h->peerCallWord[peer], &h->peerCall[peer], seq, out);
  }
  if (a.mailbox[peer] == nullptr) return false;
  MailboxHeader* h = header(a, peer);
  return readCall(&h->callWord, &h->call, seq, out);
}

// Whether a peer is in another collective with the same call number: then what this rank waits
// for may never come. The peer this wait is for is looked at first, then every other: in a ring
// of ranks each waiting for the next through the proxies (broadcasts whose roots differ), each
// rank's notice reaches only the rank it waits for, which itself waits for another.
// Reports the mismatch (naming that peer) like a stamp that came with a chunk. Stamps on only.
ACCL_DEV bool peerInAnotherCall(const CollKernelArgs& a, const WaitFor& w) {
  if (a.p2p || (w.what != kWaitPeerData && w.what != kWaitPeerSpace) || w.peer == w.rank) return false;
  const KStamp& mine = a.stamp[w.rank];
  if (mine.magic == 0) return false;
  for (int i = 0; i < a.nranks; i++) {
    const int peer = i == 0 ? w.peer : (i <= w.peer ? i - 1 : i);  // w.peer, then the others in order
    if (peer == w.rank) continue;
    KStamp theirs;
    if (!callOfPeer(a, w.rank, peer, mine.seq, &theirs) || sameStamp(theirs, mine)) continue;
    WaitFor seen = w;
    seen.peer = peer;
    if (uint64_t* report = claimReport(a, seen)) {
      putStamp(&report[kReportMine], mine);
      putStamp(&report[kReportTheirs], theirs);
      storeRelease(&report[kReportCode], kReportMismatch);
    }
    return true;
  }
  return false;
}

// Every thread of the block waits for *flag >= v; false once the host asked the kernels to
// give up (abort, a failed peer) or ACCL_TIMEOUT passed without it (the first to time out
// says what it waited for in the report): the data is then meaningless, the stream goes on.
ACCL_DEV bool waitAtLeast(const CollKernelArgs& a, const uint64_t* flag, uint64_t v, WaitFor w) {
  if (loadAcquire(flag) >= v) return true;
  // The peer's published call is compared by time, not by spin count: a spin lasts ~1 us on a
  // GPU but up to 500 us on the emulated grid (an all-idle block sleeps), where 16k spins
  // made a reduce with mismatched roots take 8 s to fail.
  constexpr uint64_t kPeerCheckNs = 16000000;
  const uint64_t start = nowNs();
  uint64_t nextPeerCheck = start + kPeerCheckNs;
  for (uint32_t i = 0;; i++) {
    if (loadAcquire(flag) >= v) return true;
    if ((i & 255) == 255) {
      if (loadAcquire(devicePointer(a.abortFlag)) != 0) return false;
      uint64_t* report = a.report ? devicePointer(a.report) : nullptr;
      if (report && loadAcquire(&report[kReportCode]) != 0) return false;  // another wait timed out
      const uint64_t now = nowNs();
      if (now >= nextPeerCheck) {
        nextPeerCheck = now + kPeerCheckNs;
        if (peerInAnotherCall(a, w)) return false;
      }
      if (a.timeoutNs && now - start > a.timeoutNs) {
        if (uint64_t* claimed = claimReport(a, w)) storeRelease(&claimed[kReportCode], kReportTimedOut);
        return false;
      }
    }
    spinPause();
  }
}

// Whether the chunk `rank` is about to use (in call `want`) came from the same call on the
// peer; if not, the first rank of this process to see it reports both stamps for the host
// (which fails the call naming both), and every wait of the launch gives up. Stamps off: true.
ACCL_DEV bool stampMatches(const CollKernelArgs& a, const KStamp* got, const KStamp& want, WaitFor w) {
  if (want.magic == 0) return true;
  const KStamp g = *got;
  if (sameStamp(g, want)) return true;
  if (uint64_t* report = claimReport(a, w)) {
    putStamp(&report[kReportMine], want);
    putStamp(&report[kReportTheirs], g);
    storeRelease(&report[kReportCode], kReportMismatch);
  }
  return false;
}

template <class E>
ACCL_DEV typename E::Compute scalarOf(const CollKernelArgs& a, int rank) {
  using S = typename E::Storage;
  S s;
  if (a.scalarKind[rank] == ScalarKind::Device) {
    s = *devicePointer(static_cast<const S*>(a.scalarPtr[rank]));
  } else {
    const unsigned char* b = a.scalarBytes[rank];
    unsigned char* o = reinterpret_cast<unsigned char*>(&s);
    for (size_t i = 0; i < sizeof(S); i++) o[i] = b[i];
  }
  return E::widen(s);
}

// Where a block stands in its task: its task (index in a.tasks) and which of the task's
// `parts` blocks it is. The task's threads split every chunk pack by pack (block_ops.h).
struct Share {
  int task;
  unsigned part, parts;
  ACCL_DEV size_t first() const { return static_cast<size_t>(part) * blockSize() + threadIndex(); }
  ACCL_DEV size_t step() const { return static_cast<size_t>(parts) * blockSize(); }
};

// After syncBlock: this block is done with its share of the task's chunk j (counted in this
// launch). Returns 1 to thread 0 of the block whose arrival makes the chunk whole (it publishes
// it), 0 to everyone else, -1 when the wait gave up. A block arrives at chunk j only once every
// block of the task arrived at chunk j-1, so the count (MailboxHeader::arrivals) says which
// chunk is whole even when blocks run at different speeds.
ACCL_DEV int arrive(const CollKernelArgs& a, const KTask& t, const Share& sh, uint64_t j) {
  if (sh.parts == 1) return threadIndex() == 0 ? 1 : 0;
  uint64_t* count = &header(a, t.rank)->arrivals[sh.task];
  if (!waitAtLeast(a, count, sh.parts * j, {t.rank, t.rank, t.ch, kWaitOwnBlocks, j})) return -1;
  if (threadIndex() != 0) return 0;
  return fetchAdd(count, 1) + 1 == sh.parts * (j + 1) ? 1 : 0;
}

template <class E>
ACCL_DEV void runSend(const CollKernelArgs& a, const KTask& t, const Share& sh) {
  using S = typename E::Storage;
  MailboxHeader* me = header(a, t.rank);
  uint64_t g = me->sent[t.peer][t.ch];  // fixed while the launch runs (endBlock moves it on)
  uint64_t j = 0;
  for (int s = 0; s < t.segments; s++) {
    const KSegment& seg = a.segments[t.firstSegment + s];
    for (uint64_t off = 0, i = 0; off < seg.bytes; off += kChunkBytes, i++, g++, j++) {
      const size_t n = seg.bytes - off < kChunkBytes ? seg.bytes - off : kChunkBytes;
      const Link out = outgoing(a, t.rank, t.peer, t.ch, g);
      if (g >= static_cast<uint64_t>(kSlots) &&
          !waitAtLeast(a, out.freed, g + 1 - kSlots, {t.rank, t.peer, t.ch, kWaitPeerSpace, g}))
        return;
      if (seg.foldWait &&
          !waitAtLeast(a, &me->folded[seg.foldWait - 1], i + 1, {t.rank, t.rank, t.ch, kWaitOwnFold, i}))
        return;
      const char* src = devicePointer(seg.src + off);
      if (seg.scaled)
        scaleRange<E>(reinterpret_cast<S*>(out.slot), reinterpret_cast<const S*>(src), n / sizeof(S), sh.first(),
                      sh.step(), scalarOf<E>(a, t.rank));
      else
        copyRange(out.slot, src, n, sh.first(), sh.step());
      syncBlock();
      const int whole = arrive(a, t, sh, j);
      if (whole < 0) return;
      if (whole) {
        if (a.viaNet[t.rank][t.peer]) proxy(a, t.rank)->outBytes[t.peer][t.ch][g % kSlots] = n;  // the proxy sends n bytes
        *out.stamp = stampOf(a, t.rank, t.rank, seg.bytes);
        storeRelease(out.posted, g + 1);
        if (t.ch == 0) storeRelease(&me->sentChunks[t.peer], i + 1);
      }
    }
  }
}

ACCL_DEV void runRecv(const CollKernelArgs& a, const KTask& t, const Share& sh) {
  MailboxHeader* me = header(a, t.rank);
  uint64_t g = me->consumed[t.peer][t.ch];
  uint64_t j = 0;
  for (int s = 0; s < t.segments; s++) {
    const KSegment& seg = a.segments[t.firstSegment + s];
    for (uint64_t off = 0; off < seg.bytes; off += kChunkBytes, g++, j++) {
      const size_t n = seg.bytes - off < kChunkBytes ? seg.bytes - off : kChunkBytes;
      const Link in = incoming(a, t.rank, t.peer, t.ch, g);
      if (!waitAtLeast(a, in.posted, g + 1, {t.rank, t.peer, t.ch, kWaitPeerData, g})) return;
      if (!stampMatches(a, in.stamp, stampOf(a, t.rank, t.peer, seg.bytes), {t.rank, t.peer, t.ch, kWaitPeerData, g}))
        return;
      copyRange(devicePointer(seg.dst + off), in.slot, n, sh.first(), sh.step());
      syncBlock();
      const int whole = arrive(a, t, sh, j);
      if (whole < 0) return;
      if (whole) storeRelease(in.freed, g + 1);
    }
  }
}

ACCL_DEV void runCopy(const CollKernelArgs& a, const KTask& t, const Share& sh) {
  for (int s = 0; s < t.segments; s++) {
    const KSegment& seg = a.segments[t.firstSegment + s];
    if (seg.src != seg.dst && seg.bytes)
      copyRange(devicePointer(seg.dst), devicePointer(seg.src), seg.bytes, sh.first(), sh.step());
  }
}

// Fold keeps no per-rank array in registers: a runtime-indexed array would land in local memory
// (a stack frame, which scripts/check_kernel_stack.sh rejects). The chunk counter of peer r is its
// stream's position at entry plus the chunk index, and the inputs' addresses sit in block-shared
// memory, written alike by every thread.
template <class E, class Op>
ACCL_DEV void runFold(const CollKernelArgs& a, const KTask& t, const Share& sh) {
  using S = typename E::Storage;
  MailboxHeader* me = header(a, t.rank);
  const KSegment& seg = a.segments[t.firstSegment];
  const int rank = t.rank;
  FoldExtras<E> extras;
  if (a.scalarKind[rank] != ScalarKind::None) {
    extras.scaledInput = rank;
    extras.k = scalarOf<E>(a, rank);
  }
  extras.divisor = a.divisor > 1 ? static_cast<int>(a.divisor) : 1;
  ACCL_BLOCK_SHARED(const S* in[kMailboxRanks]);
  for (uint64_t off = 0, i = 0; off < seg.bytes; off += kChunkBytes, i++) {
    const size_t n = (seg.bytes - off < kChunkBytes ? seg.bytes - off : kChunkBytes) / sizeof(S);
    for (int r = 0; r < a.nranks; r++) {
      if (r == rank) {
        in[r] = reinterpret_cast<const S*>(devicePointer(seg.src + off));
        continue;
      }
      const uint64_t g = me->consumed[r][t.ch] + i;
      const Link l = incoming(a, rank, r, t.ch, g);
      if (!waitAtLeast(a, l.posted, g + 1, {rank, r, t.ch, kWaitPeerData, g})) return;
      if (!stampMatches(a, l.stamp, a.stamp[rank], {rank, r, t.ch, kWaitPeerData, g})) return;
      in[r] = reinterpret_cast<const S*>(l.slot);
    }
    if (seg.foldWait)
      for (int r = 0; r < a.nranks; r++)
        if (r != rank && !waitAtLeast(a, &me->sentChunks[r], i + 1, {rank, r, 0, kWaitOwnSend, i})) return;
    S* out = reinterpret_cast<S*>(devicePointer(seg.dst + off));
    foldRange<E, Op>(out, [&](int r) { return in[r]; }, a.nranks, n, sh.first(), sh.step(), extras);
    syncBlock();  // every thread is done with this chunk (and with in[]) before it is freed
    const int whole = arrive(a, t, sh, i);
    if (whole < 0) return;
    if (whole) {
      for (int r = 0; r < a.nranks; r++) {
        if (r == rank) continue;
        const uint64_t g = me->consumed[r][t.ch] + i;
        storeRelease(incoming(a, rank, r, t.ch, g).freed, g + 1);
      }
      storeRelease(&me->folded[t.ch], i + 1);
    }
  }
}

ACCL_DEV uint64_t chunksOf(uint64_t bytes) { return (bytes + kChunkBytes - 1) / kChunkBytes; }

// Every block of the launch ends here, done or given up. The rank's last block moves its
// streams' positions on by the chunks this launch's tasks moved, and sets the per-launch
// counters back to 0 (collective_args.h): the next launch on the rank's stream starts only
// after this one ended, and finds them as the first one did, with nothing queued by the host.
// Then it says the launch ended (launch_done.h), which a launch on another stream waits for.
ACCL_DEV void endBlock(const CollKernelArgs& a, int rank) {
  syncBlock();
  if (threadIndex() != 0) return;
  MailboxHeader* me = header(a, rank);
  uint64_t blocks = 0;
  for (int ti = 0; ti < a.ntasks; ti++)
    if (a.tasks[ti].rank == rank) blocks += a.tasks[ti].blocks;
  if (fetchAdd(&me->blocksDone, 1) + 1 != blocks) return;
  for (int ti = 0; ti < a.ntasks; ti++) {
    const KTask& t = a.tasks[ti];
    if (t.rank != rank) continue;
    me->arrivals[ti] = 0;
    if (t.kind == TaskKind::Fold) {
      const uint64_t chunks = chunksOf(a.segments[t.firstSegment].bytes);
      for (int r = 0; r < a.nranks; r++)
        if (r != rank) me->consumed[r][t.ch] += chunks;
      continue;
    }
    uint64_t chunks = 0;
    for (int s = 0; s < t.segments; s++) chunks += chunksOf(a.segments[t.firstSegment + s].bytes);
    if (t.kind == TaskKind::Send) me->sent[t.peer][t.ch] += chunks;
    if (t.kind == TaskKind::Recv) me->consumed[t.peer][t.ch] += chunks;
  }
  for (int c = 0; c < kChannels; c++) me->folded[c] = 0;
  for (int r = 0; r < kMailboxRanks; r++) me->sentChunks[r] = 0;
  storeRelease(&me->blocksDone, 0);
  launchRankEnded(a.done, a.mailbox, rank);
}

template <class E, class Op>
ACCL_DEV void collective(const CollKernelArgs& a) {
  // Tasks take consecutive blocks of the grid, KTask::blocks each, in task order.
  unsigned b = blockIndex();
  int ti = 0;
  while (ti < a.ntasks && b >= a.tasks[ti].blocks) b -= a.tasks[ti++].blocks;
  if (ti >= a.ntasks) return;
  const KTask t = a.tasks[ti];
  const Share sh{ti, b, t.blocks};
  // The rank's first block publishes which collective it is in (MailboxHeader::callWord, and
  // ProxyHeader::callWord for its proxy to announce).
  if (!a.p2p && a.stamp[t.rank].magic != 0 && threadIndex() == 0 && b == 0) {
    int first = 0;
    while (a.tasks[first].rank != t.rank) first++;
    if (first == ti) {
      MailboxHeader* h = header(a, t.rank);
      publishCall(&h->callWord, &h->call, a.stamp[t.rank]);
      if (a.proxyBox[t.rank] != nullptr) {
        ProxyHeader* ph = proxy(a, t.rank);
        publishCall(&ph->callWord, &ph->call, a.stamp[t.rank]);
      }
    }
  }
  switch (t.kind) {
    case TaskKind::Send: runSend<E>(a, t, sh); break;
    case TaskKind::Recv: runRecv(a, t, sh); break;
    case TaskKind::Copy: runCopy(a, t, sh); break;
    case TaskKind::Fold: runFold<E, Op>(a, t, sh); break;
  }
  endBlock(a, t.rank);
}

}  // namespace accl::kern::coll

// accl_coll_<type>_<op>(args): one launch per collective (or group of sends and receives).
#define ACCL_COLL_KERNEL(name, nccltype, opname, Op)                                                 \
  ACCL_KERNEL_NAMED(accl_coll_##name##_##opname, (accl::kern::CollKernelArgs a)) {                   \
    accl::kern::coll::collective<accl::dev::host::ElementOf<nccltype>::type, accl::dev::host::Op>(a); \
  }
ACCL_EVERY_TYPE_AND_OP(ACCL_COLL_KERNEL)
