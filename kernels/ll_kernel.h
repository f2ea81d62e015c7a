// ll_kernel.h: the LL kernel, for calls whose largest buffer is at most kLlMaxBytes (64 KiB)
// among ranks that reach each other's mailboxes (threads or processes of one node; no network
// proxy). One pass, no handshake: each rank's one block writes what every peer needs straight
// into that peer's mailbox as 16-byte lines [data | flag | data | flag] (one store each, so a
// reader that sees both flags sees the data: no separate flag, no fence), and polls the lines
// its peers wrote into its own mailbox. collective_args.h has the regions.
//
// A call's lines are flagged with its number (the rank's LL calls so far + 1, a device counter,
// so a captured launch replays right) and go to the region of its parity. Every rank sends every
// peer kLlHeaderLines lines first (its call stamp and shape) and reads every peer's before it
// uses any data: a rank is in call k + 2 only after every peer has begun call k + 1, hence has
// finished reading call k's region. The same headers catch calls that differ (a mismatch is
// reported like the other kernels', and no data is used).
//
// What goes where, by kind (in rank order for every fold, narrowed after each op):
//   all-reduce      every rank's input to every peer; each folds all of them
//   reduce          every input to the root; the root folds
//   broadcast       the root's input to every peer
//   all-gather      every input to every peer, into output segment (sender)
//   reduce-scatter  segment d of every input to rank d; d folds
#pragma once
#include <cstddef>
#include <cstdint>
#include "collective_args.h"
#include "direct_args.h"
#include "direct_kernel.h"
#include "host/element_types.h"
#include "kernel_family.h"
#include "launch_done.h"
#include "portable.h"

namespace accl::kern::ll {

using namespace accl::dev::host;
using direct::header;
using direct::report;

// A flag that is never 0 (zeroed memory) and differs between calls k and k + 2.
ACCL_DEV uint32_t flagOf(uint64_t call) { return static_cast<uint32_t>(call % 0xFFFFFFFFull) + 1; }

// One line: 8 data bytes, each half with the flag.
ACCL_DEV void putLine(char* line, uint64_t data, uint32_t flag) {
  const uint32_t lo = static_cast<uint32_t>(data), hi = static_cast<uint32_t>(data >> 32);
#if defined(__CUDACC__)
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(line), "r"(lo), "r"(flag), "r"(hi), "r"(flag)
               : "memory");
#elif defined(__HIP__)
  uint64_t* w = reinterpret_cast<uint64_t*>(line);
  __hip_atomic_store(&w[0], lo | static_cast<uint64_t>(flag) << 32, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  __hip_atomic_store(&w[1], hi | static_cast<uint64_t>(flag) << 32, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  uint64_t* w = reinterpret_cast<uint64_t*>(line);
  __atomic_store_n(&w[0], lo | static_cast<uint64_t>(flag) << 32, __ATOMIC_RELAXED);
  __atomic_store_n(&w[1], hi | static_cast<uint64_t>(flag) << 32, __ATOMIC_RELAXED);
#endif
}

// The line's data once both halves carry `flag`; false while either does not.
ACCL_DEV bool readLine(const char* line, uint32_t flag, uint64_t* data) {
  uint32_t lo, f1, hi, f2;
#if defined(__CUDACC__)
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(lo), "=r"(f1), "=r"(hi), "=r"(f2) : "l"(line)
               : "memory");
#elif defined(__HIP__)
  const uint64_t* w = reinterpret_cast<const uint64_t*>(line);
  const uint64_t a = __hip_atomic_load(&w[0], __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  const uint64_t b = __hip_atomic_load(&w[1], __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  lo = static_cast<uint32_t>(a), f1 = static_cast<uint32_t>(a >> 32), hi = static_cast<uint32_t>(b),
  f2 = static_cast<uint32_t>(b >> 32);
#else
  const uint64_t* w = reinterpret_cast<const uint64_t*>(line);
  const uint64_t a = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
  const uint64_t b = __atomic_load_n(&w[1], __ATOMIC_RELAXED);
  lo = static_cast<uint32_t>(a), f1 = static_cast<uint32_t>(a >> 32), hi = static_cast<uint32_t>(b),
  f2 = static_cast<uint32_t>(b >> 32);
#endif
  if (f1 != flag || f2 != flag) return false;
  *data = lo | static_cast<uint64_t>(hi) << 32;
  return true;
}

// The rank's own LL call counter (MailboxHeader::llCalls): only this rank's kernels use it, one
// after another on its stream, so the kernel boundary orders it and no fence is needed (a
// system-scope fence costs about a microsecond, the order of an 8-byte call's budget).
ACCL_DEV uint64_t loadOwnCounter(const uint64_t* p) {
#if defined(__CUDACC__)
  return *reinterpret_cast<const volatile uint64_t*>(p);
#elif defined(__HIP__)
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}
ACCL_DEV void storeOwnCounter(uint64_t* p, uint64_t v) {
#if defined(__CUDACC__)
  *reinterpret_cast<volatile uint64_t*>(p) = v;
#elif defined(__HIP__)
  __hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

// Spins before a wait starts pausing: a GPU polls flat out for the first thousands (a peer's
// line is usually a microsecond away); the emulation pauses at once (its fibers share a thread).
#if ACCL_DEVICE_BUILD
constexpr uint32_t kFreeSpins = 4096;
#else
constexpr uint32_t kFreeSpins = 0;
#endif

// Waits for line `line` of `region` (sent by `peer`) to carry `flag`: false once aborted, once
// another wait of this process gave up, when the peer is found in a differing call of the
// mailbox path, or after ACCL_TIMEOUT (reported). The abort word is read every 1024 spins.
ACCL_DEV bool takeLine(const DirectArgs& a, const char* region, size_t line, uint32_t flag, int rank, int peer,
                       const KStamp& mine, uint64_t* data) {
  const char* p = region + line * kLlLineBytes;
  if (readLine(p, flag, data)) return true;
  constexpr uint64_t kPeerCheckNs = 16000000;
  uint64_t start = 0, nextPeerCheck = 0;
  for (uint32_t i = 1;; i++) {
    if (readLine(p, flag, data)) return true;
    if ((i & 1023) == 0) {
      if (loadAcquire(devicePointer(a.abortFlag)) != 0) return false;
      uint64_t* r = a.report ? devicePointer(a.report) : nullptr;
      if (r && loadAcquire(&r[kReportCode]) != 0) return false;
      const uint64_t now = nowNs();
      if (start == 0) start = now, nextPeerCheck = now + kPeerCheckNs;
      if (now >= nextPeerCheck) {
        nextPeerCheck = now + kPeerCheckNs;
        if (direct::peerInMailboxCall(a, rank, peer, mine)) return false;
      }
      if (a.timeoutNs && now - start > a.timeoutNs) {
        report(a, kReportTimedOut, rank, peer, nullptr, nullptr);
        return false;
      }
    }
    if (i > kFreeSpins) spinPause();
  }
}

// What a call is, beyond its stamp (which is all zero with stamps off): one header word.
ACCL_DEV uint64_t shapeWord(const DirectArgs& a) {
  return (a.count & 0xFFFFFFFFFFull) | static_cast<uint64_t>(a.kind & 15) << 40 |
         static_cast<uint64_t>(a.type & 31) << 44 | static_cast<uint64_t>(a.red & 7) << 49 |
         static_cast<uint64_t>((a.root + 1) & 31) << 52;
}

// A call stamp as three header words (magic and seq; count; root, kind, type, red, flags).
ACCL_DEV uint64_t stampWord0(const KStamp& s) { return s.magic | static_cast<uint64_t>(s.seq) << 32; }
ACCL_DEV uint64_t stampWord2(const KStamp& s) {
  return static_cast<uint32_t>(s.root) | static_cast<uint64_t>(s.kind) << 32 | static_cast<uint64_t>(s.type) << 40 |
         static_cast<uint64_t>(s.red) << 48 | static_cast<uint64_t>(s.flags) << 56;
}
ACCL_DEV KStamp stampOfWords(uint64_t w0, uint64_t w1, uint64_t w2) {
  KStamp s;
  s.magic = static_cast<uint32_t>(w0);
  s.seq = static_cast<uint32_t>(w0 >> 32);
  s.count = w1;
  s.root = static_cast<int32_t>(static_cast<uint32_t>(w2));
  s.kind = static_cast<uint8_t>(w2 >> 32);
  s.type = static_cast<uint8_t>(w2 >> 40);
  s.red = static_cast<uint8_t>(w2 >> 48);
  s.flags = static_cast<uint8_t>(w2 >> 56);
  return s;
}

ACCL_DEV DirectKind kindOf(const DirectArgs& a) { return static_cast<DirectKind>(a.kind); }

// Whether `from` sends data to `to` in this call, and whether `rank` receives any.
ACCL_DEV bool sendsTo(const DirectArgs& a, int from, int to) {
  switch (kindOf(a)) {
    case DirectKind::Broadcast: return from == a.root;
    case DirectKind::Reduce: return to == a.root;
    default: return true;
  }
}
ACCL_DEV bool receives(const DirectArgs& a, int rank) {
  switch (kindOf(a)) {
    case DirectKind::Broadcast: return rank != a.root;
    case DirectKind::Reduce: return rank == a.root;
    default: return true;
  }
}

// Up to 8 bytes at p (an element-aligned user buffer), zero past `avail`.
ACCL_DEV uint64_t loadWord(const char* p, size_t avail) {
  uint64_t v = 0;
  if (avail >= 8 && (reinterpret_cast<uintptr_t>(p) & 7) == 0) return *reinterpret_cast<const uint64_t*>(p);
  const size_t n = avail < 8 ? avail : 8;
  for (size_t i = 0; i < n; i++) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
ACCL_DEV void storeWord(char* p, uint64_t v, size_t avail) {
  if (avail >= 8 && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
    *reinterpret_cast<uint64_t*>(p) = v;
    return;
  }
  const size_t n = avail < 8 ? avail : 8;
  for (size_t i = 0; i < n; i++) p[i] = static_cast<char>(v >> (8 * i));
}

// Elementwise work on the 8 bytes of one line (whole elements: every type's size divides 8).
template <class E, class Op>
struct Word {
  using S = typename E::Storage;
  using C = typename E::Compute;
  static constexpr int kN = 8 / sizeof(S);
  ACCL_DEV static uint64_t fold(uint64_t acc, uint64_t v) {
    S x[kN], y[kN];
    __builtin_memcpy(x, &acc, 8);
    __builtin_memcpy(y, &v, 8);
    ACCL_UNROLL for (int i = 0; i < kN; i++) x[i] = E::narrow(Op::apply(E::widen(x[i]), E::widen(y[i])));
    __builtin_memcpy(&acc, x, 8);
    return acc;
  }
  ACCL_DEV static uint64_t scale(uint64_t v, C k) {
    S x[kN];
    __builtin_memcpy(x, &v, 8);
    ACCL_UNROLL for (int i = 0; i < kN; i++) x[i] = E::narrow(ProdOp::apply(E::widen(x[i]), k));
    __builtin_memcpy(&v, x, 8);
    return v;
  }
  ACCL_DEV static uint64_t divide(uint64_t v, int d) {
    S x[kN];
    __builtin_memcpy(x, &v, 8);
    ACCL_UNROLL for (int i = 0; i < kN; i++) x[i] = divideOne<E>(x[i], d);
    __builtin_memcpy(&v, x, 8);
    return v;
  }
};

template <class E, class Op>
ACCL_DEV void runRank(const DirectArgs& a, const DirectEntry& me) {
  using S = typename E::Storage;
  using C = typename E::Compute;
  using W = Word<E, Op>;
  ACCL_BLOCK_SHARED(int failed);
  const int n = a.nranks, rank = me.rank;
  const unsigned t = threadIndex(), T = blockSize();
  const size_t bytes = a.count * sizeof(S);  // per pair: one input, or one segment of it
  const size_t lines = (bytes + 7) / 8;
  MailboxHeader* own = header(a, rank);
  const uint64_t call = loadOwnCounter(&own->llCalls) + 1;
  const uint32_t flag = flagOf(call);
  const DirectKind kind = kindOf(a);
  // A buffer the call does not use may be null (a broadcast's non-root input, a reduce's
  // non-root output): never translated, never touched.
  const char* send = me.send ? devicePointer(me.send) : nullptr;
  char* recv = me.recv ? devicePointer(me.recv) : nullptr;
  const bool scaled = me.scalarKind != ScalarKind::None;
  C k{};
  if (scaled) {
    S s;
    if (me.scalarKind == ScalarKind::Device) __builtin_memcpy(&s, devicePointer(static_cast<const S*>(me.scalarPtr)), sizeof(S));
    else __builtin_memcpy(&s, me.scalarBytes, sizeof(S));
    k = E::widen(s);
  }
  if (t == 0) {
    failed = 0;
    if (me.stamp.magic != 0) {  // the call, for a peer that waits in the mailbox path
      storeRelease(&own->callWord, 0);
      fenceSystem();
      own->call = me.stamp;
      storeRelease(&own->callWord, static_cast<uint64_t>(me.stamp.seq) + 1);
    }
  }
  // Send: the header to every peer, the data to those that take it (this rank's contribution,
  // scaled here when it is PreMulSum's, so the receiver folds it as it comes).
  const uint64_t w0 = stampWord0(me.stamp), w1 = me.stamp.count, w2 = stampWord2(me.stamp);
  const uint64_t shape = shapeWord(a);
  for (int d = 0; d < n; d++) {
    if (d == rank) continue;
    char* region = devicePointer(a.mailbox[d] + llOffset(n, rank, call));
    const size_t total = kLlHeaderLines + (sendsTo(a, rank, d) ? lines : 0);
    const char* src = send + (kind == DirectKind::ReduceScatter ? static_cast<size_t>(d) * bytes : 0);
    for (size_t i = t; i < total; i += T) {
      uint64_t v;
      if (i < kLlHeaderLines) v = i == 0 ? w0 : i == 1 ? w1 : i == 2 ? w2 : shape;
      else {
        const size_t off = (i - kLlHeaderLines) * 8;
        v = loadWord(src + off, bytes - off);
        if (scaled) v = W::scale(v, k);
      }
      putLine(region + i * kLlLineBytes, v, flag);
    }
  }
  syncBlock();
  // Every peer's header, one thread per peer: the same call, or a mismatch (no data is used).
  for (int q = static_cast<int>(t); q < n; q += static_cast<int>(T)) {
    if (q == rank) continue;
    const char* region = devicePointer(a.mailbox[rank] + llOffset(n, q, call));
    uint64_t h0 = 0, h1 = 0, h2 = 0, h3 = 0;
    if (!takeLine(a, region, 0, flag, rank, q, me.stamp, &h0) || !takeLine(a, region, 1, flag, rank, q, me.stamp, &h1) ||
        !takeLine(a, region, 2, flag, rank, q, me.stamp, &h2) || !takeLine(a, region, 3, flag, rank, q, me.stamp, &h3)) {
      failed = 1;
      continue;
    }
    KStamp theirs = stampOfWords(h0, h1, h2);
    if (h3 != shape || (me.stamp.magic != 0 && !direct::sameStamp(theirs, me.stamp))) {
      theirs.count = h3 & 0xFFFFFFFFFFull;  // the size the peer was called with
      report(a, kReportMismatch, rank, q, &me.stamp, &theirs);
      failed = 1;
    }
  }
  syncBlock();
  if (!failed && receives(a, rank)) {
    const int divisor = static_cast<int>(a.divisor);
    if (kind == DirectKind::AllGather || kind == DirectKind::Broadcast) {
      // Copies: each sender's lines into its place in the output.
      for (int q = 0; q < n && !failed; q++) {
        if (q == rank || !sendsTo(a, q, rank)) continue;
        const char* region = devicePointer(a.mailbox[rank] + llOffset(n, q, call));
        char* out = recv + (kind == DirectKind::AllGather ? static_cast<size_t>(q) * bytes : 0);
        for (size_t j = t; j < lines; j += T) {
          uint64_t v;
          if (!takeLine(a, region, kLlHeaderLines + j, flag, rank, q, me.stamp, &v)) {
            failed = 1;
            break;
          }
          storeWord(out + j * 8, v, bytes - j * 8);
        }
      }
    } else {
      // Folds: every rank's contribution in rank order, this rank's from its own input.
      const char* mine = send + (kind == DirectKind::ReduceScatter ? static_cast<size_t>(rank) * bytes : 0);
      for (size_t j = t; j < lines && !failed; j += T) {
        uint64_t acc = 0;
        bool ok = true;
        for (int q = 0; q < n && ok; q++) {
          uint64_t v;
          if (q == rank) {
            v = loadWord(mine + j * 8, bytes - j * 8);
            if (scaled) v = W::scale(v, k);
          } else {
            ok = takeLine(a, devicePointer(a.mailbox[rank] + llOffset(n, q, call)), kLlHeaderLines + j, flag, rank, q,
                          me.stamp, &v);
          }
          acc = q == 0 ? v : W::fold(acc, v);
        }
        if (!ok) {
          failed = 1;
          break;
        }
        if (divisor > 1) acc = W::divide(acc, divisor);
        storeWord(recv + j * 8, acc, bytes - j * 8);
      }
    }
  }
  // This rank's own part of a copy: its input into its place in the output (not in place).
  if (!failed && (kind == DirectKind::AllGather || (kind == DirectKind::Broadcast && rank == a.root))) {
    char* out = recv + (kind == DirectKind::AllGather ? static_cast<size_t>(rank) * bytes : 0);
    if (out != send)
      for (size_t j = t; j < lines; j += T) storeWord(out + j * 8, loadWord(send + j * 8, bytes - j * 8), bytes - j * 8);
  }
  syncBlock();  // every thread is done with the call's lines and buffers
  if (t != 0) return;
  storeOwnCounter(&own->llCalls, call);
  launchRankEnded(a.done, a.mailbox, rank);  // release stores: the host learns the launch ended
}

template <class E, class Op>
ACCL_DEV void run(const DirectArgs& a) {
  const int entry = static_cast<int>(blockIndex());
  if (entry >= a.entries) return;
  runRank<E, Op>(a, a.entry[entry]);
}

}  // namespace accl::kern::ll

// accl_ll_<type>_<op>(args): one launch per LL collective, one block per rank it carries.
#define ACCL_LL_KERNEL(name, nccltype, opname, Op)                                           \
  ACCL_KERNEL_NAMED(accl_ll_##name##_##opname, (accl::kern::DirectArgs a)) {                 \
    accl::kern::ll::run<accl::dev::host::ElementOf<nccltype>::type, accl::dev::host::Op>(a); \
  }
// Not in clang's HIP build: clang 19 spends minutes of -O3 on each of these (two of them took
// over three minutes for gfx90a alone), which CI's 2 cores cannot afford for 48 kernels x 2
// targets; the HIP backend keeps small calls on the mailbox kernel (Backend::hasLlKernels).
#if !defined(__HIP__)
ACCL_EVERY_TYPE_AND_OP(ACCL_LL_KERNEL)
#endif
