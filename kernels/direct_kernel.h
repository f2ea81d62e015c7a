// direct_kernel.h: the direct kernel (direct_args.h says the protocol): ranks of one process
// whose devices reach each other use each other's user buffers in place. The call's work space
// (the count's bytes; nranks segments of them for all-gather and reduce-scatter) is cut into one
// share per (rank, block); for each piece of its share a worker folds the inputs it needs in rank
// order and stores the result into the outputs that take it (foldPiece):
//   all-reduce      every input         -> every output
//   reduce          every input         -> the root's output
//   broadcast       the root's input    -> every output
//   all-gather      segment s: rank s's input -> every output at s x bytes
//   reduce-scatter  segment s: every input at s x bytes -> rank s's output
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include "collective_args.h"
#include "direct_args.h"
#include "host/element_types.h"
#include "kernel_family.h"
#include "launch_done.h"
#include "portable.h"

namespace accl::kern::direct {

using namespace accl::dev::host;

#if defined(__CUDACC__)
ACCL_DEV uint64_t fetchAdd(uint64_t* w, uint64_t v) {
  return atomicAdd(reinterpret_cast<unsigned long long*>(w), static_cast<unsigned long long>(v));
}
#elif defined(__HIP__)
ACCL_DEV uint64_t fetchAdd(uint64_t* w, uint64_t v) {
  return __hip_atomic_fetch_add(w, v, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_SYSTEM);
}
#else
inline uint64_t fetchAdd(uint64_t* w, uint64_t v) { return __atomic_fetch_add(w, v, __ATOMIC_SEQ_CST); }
#endif

// The emulated build tells the fake driver how many payload bytes a block moves, by the device
// address they are at (tests check where the bytes went: tests/fake_cuda/kernels.cc).
#if !ACCL_DEVICE_BUILD
void notePayload(const void* p, uint64_t bytes, int store) __attribute__((weak));
inline void countPayload(const void* p, uint64_t bytes, int store) {
  if (&notePayload != nullptr) notePayload(p, bytes, store);
}
#else
ACCL_DEV void countPayload(const void*, uint64_t, int) {}
#endif

ACCL_DEV MailboxHeader* header(const DirectArgs& a, int rank) {
  return devicePointer(reinterpret_cast<MailboxHeader*>(a.mailbox[rank]));
}

ACCL_DEV void putStampWords(uint64_t* words, const KStamp& s) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(&s);
  for (int w = 0; w < 3; w++) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[w * 8 + i];
    words[w] = v;
  }
}

ACCL_DEV bool sameStamp(const KStamp& x, const KStamp& y) {
  return x.magic == y.magic && x.seq == y.seq && x.count == y.count && x.root == y.root && x.kind == y.kind &&
         x.type == y.type && x.red == y.red && x.flags == y.flags;
}

ACCL_DEV KStamp readStamp(const volatile KStamp* p) {
  KStamp s;
  s.magic = p->magic;
  s.seq = p->seq;
  s.count = p->count;
  s.root = p->root;
  s.kind = p->kind;
  s.type = p->type;
  s.red = p->red;
  s.flags = p->flags;
  return s;
}

// The first waiter of this process to give up fills the report (kern::ReportWord, as the
// collective kernel does) and sets its code last.
ACCL_DEV void report(const DirectArgs& a, uint64_t code, int rank, int peer, const KStamp* mine, const KStamp* theirs) {
  uint64_t* r = a.report ? devicePointer(a.report) : nullptr;
  if (!r || !claimOnce(&r[kReportRank], static_cast<uint64_t>(rank) + 1)) return;
  r[kReportPeer] = static_cast<uint64_t>(peer);
  r[kReportWhat] = kWaitPeerData;
  r[kReportChannel] = 0;
  r[kReportChunk] = 0;
  if (mine && theirs) {
    putStampWords(&r[kReportMine], *mine);
    putStampWords(&r[kReportTheirs], *theirs);
  }
  storeRelease(&r[kReportCode], code);
}

// Whether `peer` runs, through the mailbox path, a call with our call number that differs from
// ours (its count chose the other path): reported as a mismatch. Stamps off: never known.
ACCL_DEV bool peerInMailboxCall(const DirectArgs& a, int rank, int peer, const KStamp& mine) {
  if (mine.magic == 0) return false;
  MailboxHeader* h = header(a, peer);
  const uint64_t word = loadAcquire(&h->callWord);
  if (word != static_cast<uint64_t>(mine.seq) + 1) return false;
  const KStamp theirs = readStamp(&h->call);
  fenceSystem();
  if (loadAcquire(&h->callWord) != word || sameStamp(theirs, mine)) return false;
  report(a, kReportMismatch, rank, peer, &mine, &theirs);
  return true;
}

// One thread waits for *flag >= v: false once aborted, once another wait of this process gave
// up (the report's code), or when ACCL_TIMEOUT passed (reported). The abort word is read every
// 256 spins, as the collective kernel's waitAtLeast does.
ACCL_DEV bool waitFor(const DirectArgs& a, const uint64_t* flag, uint64_t v, int rank, int peer, const KStamp& mine) {
  if (loadAcquire(flag) >= v) return true;
  constexpr uint64_t kPeerCheckNs = 16000000;
  const uint64_t start = nowNs();
  uint64_t nextPeerCheck = start + kPeerCheckNs;
  for (uint32_t i = 0;; i++) {
    if (loadAcquire(flag) >= v) return true;
    if ((i & 255) == 255) {
      if (loadAcquire(devicePointer(a.abortFlag)) != 0) return false;
      uint64_t* r = a.report ? devicePointer(a.report) : nullptr;
      if (r && loadAcquire(&r[kReportCode]) != 0) return false;
      const uint64_t now = nowNs();
      if (now >= nextPeerCheck) {
        nextPeerCheck = now + kPeerCheckNs;
        if (peer != rank && peerInMailboxCall(a, rank, peer, mine)) return false;
      }
      if (a.timeoutNs && now - start > a.timeoutNs) {
        report(a, kReportTimedOut, rank, peer, nullptr, nullptr);
        return false;
      }
    }
    spinPause();
  }
}

ACCL_DEV bool samePost(const DirectArgs& a, const DirectPost& p, const DirectEntry& e) {
  if (p.count != a.count || p.kind != a.kind || p.type != a.type || p.red != a.red || p.root != a.root) return false;
  return e.stamp.magic == 0 || sameStamp(p.stamp, e.stamp);
}

template <class E>
ACCL_DEV typename E::Storage storageOf(const unsigned char* b) {
  typename E::Storage s;
  __builtin_memcpy(&s, b, sizeof(s));
  return s;
}

template <class E, class Op>
struct Lanes {
  using S = typename E::Storage;
  using C = typename E::Compute;
  static constexpr int kN = 16 / sizeof(S);
  ACCL_DEV static Vec16 scale(Vec16 v, C k) {
    S x[kN];
    __builtin_memcpy(x, &v, 16);
    ACCL_UNROLL for (int i = 0; i < kN; i++) x[i] = E::narrow(ProdOp::apply(E::widen(x[i]), k));
    __builtin_memcpy(&v, x, 16);
    return v;
  }
  ACCL_DEV static Vec16 fold(Vec16 acc, Vec16 v) {
    S x[kN], y[kN];
    __builtin_memcpy(x, &acc, 16);
    __builtin_memcpy(y, &v, 16);
    ACCL_UNROLL for (int i = 0; i < kN; i++) x[i] = E::narrow(Op::apply(E::widen(x[i]), E::widen(y[i])));
    __builtin_memcpy(&acc, x, 16);
    return acc;
  }
  ACCL_DEV static Vec16 divide(Vec16 v, int d) {
    S x[kN];
    __builtin_memcpy(x, &v, 16);
    ACCL_UNROLL for (int i = 0; i < kN; i++) x[i] = divideOne<E>(x[i], d);
    __builtin_memcpy(&v, x, 16);
    return v;
  }
};

constexpr int kDirectUnroll = 4;

ACCL_DEV DirectKind kindOf(const DirectArgs& a) { return static_cast<DirectKind>(a.kind); }

// One piece of a call: the inputs of ranks [q0, q1) at byte srcOff folded in rank order (rank
// q0's value, then op with the next one's, narrowed after every op, as the collective kernel's
// Fold task does: the same bits; each scaled first when it is PreMulSum's; the result divided
// for ncclAvg), stored into the outputs of ranks [r0, r1) at byte dstOff. A copy is the fold of
// one rank. src, dst, scaled and k are block-shared, indexed by rank.
template <class E, class Op>
ACCL_DEV void foldPiece(const char* const* src, char* const* dst, const uint8_t* scaled, const typename E::Compute* k,
                        int q0, int q1, int r0, int r1, size_t srcOff, size_t dstOff, size_t len, int divisor) {
  using S = typename E::Storage;
  using L = Lanes<E, Op>;
  bool aligned = true;
  for (int q = q0; q < q1; q++) aligned = aligned && vecAligned(src[q] + srcOff, src[q] + srcOff);
  for (int r = r0; r < r1; r++) aligned = aligned && vecAligned(dst[r] + dstOff, dst[r] + dstOff);
  size_t head = 0;
  if (aligned) {
    const size_t vecs = len / 16, step = blockSize(), span = step * kDirectUnroll;
    const size_t whole = vecs / span * span;
    for (size_t base = threadIndex(); base < whole; base += span) {
      Vec16 acc[kDirectUnroll];
      ACCL_UNROLL for (int u = 0; u < kDirectUnroll; u++) acc[u] = loadVec(src[q0] + srcOff + 16 * (base + u * step));
      if (scaled[q0]) {
        ACCL_UNROLL for (int u = 0; u < kDirectUnroll; u++) acc[u] = L::scale(acc[u], k[q0]);
      }
      for (int q = q0 + 1; q < q1; q++) {
        Vec16 x[kDirectUnroll];
        ACCL_UNROLL for (int u = 0; u < kDirectUnroll; u++) x[u] = loadVec(src[q] + srcOff + 16 * (base + u * step));
        if (scaled[q]) {
          ACCL_UNROLL for (int u = 0; u < kDirectUnroll; u++) x[u] = L::scale(x[u], k[q]);
        }
        ACCL_UNROLL for (int u = 0; u < kDirectUnroll; u++) acc[u] = L::fold(acc[u], x[u]);
      }
      if (divisor > 1) {
        ACCL_UNROLL for (int u = 0; u < kDirectUnroll; u++) acc[u] = L::divide(acc[u], divisor);
      }
      for (int r = r0; r < r1; r++) {
        ACCL_UNROLL for (int u = 0; u < kDirectUnroll; u++) storeVec(dst[r] + dstOff + 16 * (base + u * step), acc[u]);
      }
    }
    for (size_t i = whole + threadIndex(); i < vecs; i += step) {
      Vec16 acc = loadVec(src[q0] + srcOff + 16 * i);
      if (scaled[q0]) acc = L::scale(acc, k[q0]);
      for (int q = q0 + 1; q < q1; q++) {
        Vec16 x = loadVec(src[q] + srcOff + 16 * i);
        if (scaled[q]) x = L::scale(x, k[q]);
        acc = L::fold(acc, x);
      }
      if (divisor > 1) acc = L::divide(acc, divisor);
      for (int r = r0; r < r1; r++) storeVec(dst[r] + dstOff + 16 * i, acc);
    }
    head = vecs * 16;
  }
  // Element by element where a buffer is only element-aligned, and the tail.
  for (size_t e = head / sizeof(S) + threadIndex(); e < len / sizeof(S); e += blockSize()) {
    S acc;
    __builtin_memcpy(&acc, src[q0] + srcOff + e * sizeof(S), sizeof(S));
    if (scaled[q0]) acc = E::narrow(ProdOp::apply(E::widen(acc), k[q0]));
    for (int q = q0 + 1; q < q1; q++) {
      S x;
      __builtin_memcpy(&x, src[q] + srcOff + e * sizeof(S), sizeof(S));
      if (scaled[q]) x = E::narrow(ProdOp::apply(E::widen(x), k[q]));
      acc = E::narrow(Op::apply(E::widen(acc), E::widen(x)));
    }
    if (divisor > 1) acc = divideOne<E>(acc, divisor);
    for (int r = r0; r < r1; r++) __builtin_memcpy(dst[r] + dstOff + e * sizeof(S), &acc, sizeof(S));
  }
}

// Whether this call loads rank r's input / stores into rank r's output at all (a broadcast
// reads only the root's input, a reduce writes only the root's output; the buffers a call does
// not use are never touched, whatever the caller passed).
ACCL_DEV bool loadsFrom(const DirectArgs& a, int r) { return kindOf(a) != DirectKind::Broadcast || r == a.root; }
ACCL_DEV bool storesTo(const DirectArgs& a, int r) { return kindOf(a) != DirectKind::Reduce || r == a.root; }

// The call's work space: the bytes the workers split. All-gather and reduce-scatter: nranks
// segments of `bytes`, segment s being rank s's input (all-gather) or output (reduce-scatter).
ACCL_DEV size_t workBytes(const DirectArgs& a, size_t bytes) {
  const DirectKind k = kindOf(a);
  return k == DirectKind::AllGather || k == DirectKind::ReduceScatter ? bytes * static_cast<size_t>(a.nranks) : bytes;
}

// For the fake driver's counters: the bytes of rank r's buffers (device addresses, as posted)
// the worker for [lo, hi) of the work space loads and stores.
ACCL_DEV void countRank(const DirectArgs& a, const DirectPost& p, int r, size_t lo, size_t hi, size_t bytes) {
  if (hi <= lo) return;
  const DirectKind k = kindOf(a);
  if (k == DirectKind::AllGather || k == DirectKind::ReduceScatter) {
    const size_t segLo = static_cast<size_t>(r) * bytes, segHi = segLo + bytes;
    const size_t x = lo > segLo ? lo : segLo, y = hi < segHi ? hi : segHi;
    if (k == DirectKind::AllGather) {
      if (y > x) countPayload(p.send + (x - segLo), y - x, 0);
      countPayload(p.recv + lo, hi - lo, 1);
    } else {
      countPayload(p.send + lo, hi - lo, 0);
      if (y > x) countPayload(p.recv + (x - segLo), y - x, 1);
    }
    return;
  }
  if (loadsFrom(a, r)) countPayload(p.send + lo, hi - lo, 0);
  if (storesTo(a, r)) countPayload(p.recv + lo, hi - lo, 1);
}

template <class E, class Op>
ACCL_DEV void runCall(const DirectArgs& a, int rank, int block) {
  using S = typename E::Storage;
  using C = typename E::Compute;
  // Every rank's buffers (null where the call does not use them) and scalars: block-shared,
  // written by the thread that read the rank's post (no runtime-indexed array in local memory).
  ACCL_BLOCK_SHARED(const char* src[kMailboxRanks]);
  ACCL_BLOCK_SHARED(char* dst[kMailboxRanks]);
  ACCL_BLOCK_SHARED(uint8_t scaled[kMailboxRanks]);
  ACCL_BLOCK_SHARED(C k[kMailboxRanks]);
  ACCL_BLOCK_SHARED(int failed);
  const int n = a.nranks;
  const size_t bytes = a.count * sizeof(S);
  const size_t space = workBytes(a, bytes);
  // This worker's share of the work space: cut on 16 bytes, one share per (rank, block).
  const size_t units = (space + 15) / 16;
  const size_t workers = static_cast<size_t>(n) * a.blocksPerRank;
  const size_t w = static_cast<size_t>(rank) * a.blocksPerRank + block;
  const size_t lo = units * w / workers * 16;
  size_t hi = units * (w + 1) / workers * 16;
  if (hi > space) hi = space;
  const int entry = static_cast<int>(blockIndex()) / a.blocksPerRank;
  const DirectEntry& me = a.entry[entry];
  MailboxHeader* own = header(a, rank);
  const uint64_t call = loadAcquire(&own->directCalls) + 1;
  if (threadIndex() == 0) failed = 0;
  if (block == 0 && threadIndex() == 0) {
    DirectPost& p = own->direct;
    p.send = me.send;
    p.recv = me.recv;
    p.count = a.count;
    p.stamp = me.stamp;
    p.kind = a.kind;
    p.type = a.type;
    p.red = a.red;
    p.root = a.root;
    p.scaled = me.scalarKind != ScalarKind::None;
    if (me.scalarKind == ScalarKind::Device) __builtin_memcpy(p.scalar, devicePointer(static_cast<const S*>(me.scalarPtr)), sizeof(S));
    else __builtin_memcpy(p.scalar, me.scalarBytes, sizeof(p.scalar));
    if (me.stamp.magic != 0) {  // the call, for a peer that waits in the mailbox path (collective_kernel.h)
      storeRelease(&own->callWord, 0);
      fenceSystem();
      own->call = me.stamp;
      storeRelease(&own->callWord, static_cast<uint64_t>(me.stamp.seq) + 1);
    }
    storeRelease(&own->directReady, call);
  }
  syncBlock();
  // One thread per rank waits for its post of this call and checks it is the same call.
  for (int r = static_cast<int>(threadIndex()); r < n; r += static_cast<int>(blockSize())) {
    MailboxHeader* h = header(a, r);
    if (!waitFor(a, &h->directReady, call, rank, r, me.stamp)) {
      failed = 1;
      continue;
    }
    DirectPost p = h->direct;
    if (!samePost(a, p, me)) {
      KStamp theirs = p.stamp;
      theirs.count = p.count;  // the size the peer was called with, whatever its stamps say
      report(a, kReportMismatch, rank, r, &me.stamp, &theirs);
      failed = 1;
      continue;
    }
    countRank(a, p, r, lo, hi, bytes);
    src[r] = loadsFrom(a, r) ? devicePointer(p.send) : nullptr;
    dst[r] = storesTo(a, r) ? devicePointer(p.recv) : nullptr;
    scaled[r] = p.scaled;
    k[r] = p.scaled ? E::widen(storageOf<E>(p.scalar)) : C{};
  }
  syncBlock();
  if (!failed && hi > lo) {
    const int divisor = static_cast<int>(a.divisor);
    const DirectKind kind = kindOf(a);
    if (kind == DirectKind::AllGather || kind == DirectKind::ReduceScatter) {
      // The segments [lo, hi) crosses: rank s's input copied into every output at s x bytes, or
      // every input's segment s folded into rank s's output.
      for (size_t s = lo / bytes; s < static_cast<size_t>(n) && s * bytes < hi; s++) {
        const size_t segLo = s * bytes;
        const size_t x = lo > segLo ? lo : segLo, y = hi < segLo + bytes ? hi : segLo + bytes;
        const int seg = static_cast<int>(s);
        if (kind == DirectKind::AllGather)
          foldPiece<E, Op>(src, dst, scaled, k, seg, seg + 1, 0, n, x - segLo, x, y - x, 1);
        else
          foldPiece<E, Op>(src, dst, scaled, k, 0, n, seg, seg + 1, x, x - segLo, y - x, divisor);
      }
    } else {
      const bool bcast = kind == DirectKind::Broadcast, reduce = kind == DirectKind::Reduce;
      foldPiece<E, Op>(src, dst, scaled, k, bcast ? a.root : 0, bcast ? a.root + 1 : n, reduce ? a.root : 0,
                       reduce ? a.root + 1 : n, lo, lo, hi - lo, bcast ? 1 : divisor);
    }
  }
  syncBlock();  // the block's stores are issued before its thread 0 says the block is done
  if (threadIndex() != 0) return;
  fenceSystem();
  if (fetchAdd(&own->directArrived, 1) + 1 != static_cast<uint64_t>(a.blocksPerRank)) return;
  // The rank's last block: every block's part is done. Say so, wait until every peer is done
  // with this rank's buffers, then count the call (the next launch's number).
  own->directArrived = 0;
  storeRelease(&own->directDone, call);
  bool ok = !failed;
  for (int r = 0; r < n && ok; r++)
    if (r != rank) ok = waitFor(a, &header(a, r)->directDone, call, rank, r, me.stamp);
  storeRelease(&own->directCalls, call);
  launchRankEnded(a.done, a.mailbox, rank);
}

template <class E, class Op>
ACCL_DEV void run(const DirectArgs& a) {
  const int entry = static_cast<int>(blockIndex()) / a.blocksPerRank;
  if (entry >= a.entries) return;
  const int block = static_cast<int>(blockIndex()) % a.blocksPerRank;
  runCall<E, Op>(a, a.entry[entry].rank, block);
}

}  // namespace accl::kern::direct

// accl_direct_<type>_<op>(args): one launch per direct collective.
#define ACCL_DIRECT_KERNEL(name, nccltype, opname, Op)                                              \
  ACCL_KERNEL_NAMED(accl_direct_##name##_##opname, (accl::kern::DirectArgs a)) {                    \
    accl::kern::direct::run<accl::dev::host::ElementOf<nccltype>::type, accl::dev::host::Op>(a);    \
  }
ACCL_EVERY_TYPE_AND_OP(ACCL_DIRECT_KERNEL)
