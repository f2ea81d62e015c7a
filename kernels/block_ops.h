// block_ops.h: the copy and reduce loops that device kernels run over a range of bytes, written
// once for every kernel (the collective kernel, the direct kernel) and every element type.
// A loop is told which threads share the range: thread `first` of `step` takes every step-th
// 16-byte pack, so one block (first = threadIndex(), step = blockSize()) or several blocks of a
// task (first = part * blockSize() + threadIndex(), step = parts * blockSize()) split it alike.
// Each thread keeps packsInFlight<E>() independent 16-byte loads per input in flight before it
// combines and stores (a load's latency is ~1 us on a GPU: one at a time leaves the memory
// system idle). Packs sit in fixed-size arrays indexed by constants after unrolling, so they live
// in registers: no stack frame (scripts/check_kernel_stack.sh).
#pragma once
#include <cstddef>
#include <cstdint>
#include "host/element_types.h"
#include "portable.h"

namespace accl::kern {

// Packs per thread in flight in the reduce loop, per input: 4 for elements of 4 bytes and more;
// fewer for narrow ones, whose packs widen to 8 or 16 registers each (ptxas gave the 1-byte
// folds ~250 registers at 4, which a 512-thread block cannot launch with: 128 at most).
template <class E>
constexpr int packsInFlight() {
  return sizeof(typename E::Storage) >= 4 ? 4 : sizeof(typename E::Storage) == 2 ? 2 : 1;
}

// One 16-byte pack of elements of E (its Storage type).
template <class E>
struct alignas(16) Pack {
  using S = typename E::Storage;
  static constexpr int kElems = static_cast<int>(16 / sizeof(S));
  S e[kElems];
};

template <class E>
ACCL_DEV Pack<E> loadPack(const void* p) {
  const Vec16 v = loadVec(p);
  Pack<E> r;
  __builtin_memcpy(&r, &v, 16);
  return r;
}
template <class E>
ACCL_DEV void storePack(void* p, const Pack<E>& x) {
  Vec16 v;
  __builtin_memcpy(&v, &x, 16);
  storeVec(p, v);
}

// What a fold does besides combining: input `scaledInput` (-1: none) is multiplied by `k` first
// (PreMulSum, rounded to the element type), and the result divided by `divisor` when > 1 (ncclAvg).
template <class E>
struct FoldExtras {
  int scaledInput = -1;
  typename E::Compute k{};
  int divisor = 1;
};

// One element: inputs combined in input order, narrowed after every operation (the host
// backend's ACCL_DETERMINISTIC=1 bits).
template <class E>
ACCL_DEV typename E::Storage scaledOne(typename E::Storage x, typename E::Compute k) {
  return E::narrow(dev::host::ProdOp::apply(E::widen(x), k));
}

template <class E, class Op>
ACCL_DEV void combinePack(Pack<E>* acc, const Pack<E>& x) {
  ACCL_UNROLL for (int i = 0; i < Pack<E>::kElems; i++) acc->e[i] = E::narrow(Op::apply(E::widen(acc->e[i]), E::widen(x.e[i])));
}
template <class E>
ACCL_DEV void scalePack(Pack<E>* x, typename E::Compute k) {
  ACCL_UNROLL for (int i = 0; i < Pack<E>::kElems; i++) x->e[i] = scaledOne<E>(x->e[i], k);
}
template <class E>
ACCL_DEV void dividePack(Pack<E>* x, int divisor) {
  ACCL_UNROLL for (int i = 0; i < Pack<E>::kElems; i++) x->e[i] = dev::host::divideOne<E>(x->e[i], divisor);
}

// dst[e] = the fold of in(0)[e] .. in(nin-1)[e] for e in [0, count), split over the threads as
// above. `in(r)` returns input r's base (const E::Storage*), read again at every pack round
// (it may come from block-shared memory: no per-input array in registers). Packs when dst and
// every input share their offset within 16 bytes (scalar head up to the first aligned pack);
// scalar otherwise and for the tail. dst may be one of the inputs (an in-place fold): each
// thread loads a pack of every input before it stores that pack.
template <class E, class Op, class Inputs>
ACCL_DEV void foldRange(typename E::Storage* dst, const Inputs& in, int nin, size_t count, size_t first,
                        size_t step, const FoldExtras<E>& x) {
  using S = typename E::Storage;
  constexpr int kN = Pack<E>::kElems;
  constexpr int kPacksInFlight = packsInFlight<E>();
  const uintptr_t mis = reinterpret_cast<uintptr_t>(dst) & 15;
  bool packs = mis % sizeof(S) == 0;
  for (int r = 0; r < nin; r++) packs = packs && (reinterpret_cast<uintptr_t>(in(r)) & 15) == mis;
  auto one = [&](size_t e) {
    S acc = in(0)[e];
    if (x.scaledInput == 0) acc = scaledOne<E>(acc, x.k);
    for (int r = 1; r < nin; r++) {
      S v = in(r)[e];
      if (x.scaledInput == r) v = scaledOne<E>(v, x.k);
      acc = E::narrow(Op::apply(E::widen(acc), E::widen(v)));
    }
    dst[e] = x.divisor > 1 ? dev::host::divideOne<E>(acc, x.divisor) : acc;
  };
  size_t head = count;
  if (packs) {
    head = mis ? (16 - mis) / sizeof(S) : 0;
    if (head > count) head = count;
  }
  for (size_t e = first; e < head; e += step) one(e);
  if (!packs) return;
  const size_t npacks = (count - head) / kN;
  const size_t span = step * kPacksInFlight;
  const size_t whole = npacks / span * span;
  for (size_t base = first; base < whole; base += span) {
    Pack<E> acc[kPacksInFlight];  // constant indices only, after unrolling: registers
    ACCL_UNROLL for (int u = 0; u < kPacksInFlight; u++) acc[u] = loadPack<E>(in(0) + head + (base + u * step) * kN);
    if (x.scaledInput == 0) ACCL_UNROLL for (int u = 0; u < kPacksInFlight; u++) scalePack<E>(&acc[u], x.k);
    for (int r = 1; r < nin; r++) {
      const S* src = in(r) + head;
      Pack<E> v[kPacksInFlight];
      ACCL_UNROLL for (int u = 0; u < kPacksInFlight; u++) v[u] = loadPack<E>(src + (base + u * step) * kN);
      if (x.scaledInput == r) ACCL_UNROLL for (int u = 0; u < kPacksInFlight; u++) scalePack<E>(&v[u], x.k);
      ACCL_UNROLL for (int u = 0; u < kPacksInFlight; u++) combinePack<E, Op>(&acc[u], v[u]);
    }
    if (x.divisor > 1) ACCL_UNROLL for (int u = 0; u < kPacksInFlight; u++) dividePack<E>(&acc[u], x.divisor);
    ACCL_UNROLL for (int u = 0; u < kPacksInFlight; u++) storePack<E>(dst + head + (base + u * step) * kN, acc[u]);
  }
  for (size_t p = whole + first; p < npacks; p += step) {
    Pack<E> acc = loadPack<E>(in(0) + head + p * kN);
    if (x.scaledInput == 0) scalePack<E>(&acc, x.k);
    for (int r = 1; r < nin; r++) {
      Pack<E> v = loadPack<E>(in(r) + head + p * kN);
      if (x.scaledInput == r) scalePack<E>(&v, x.k);
      combinePack<E, Op>(&acc, v);
    }
    if (x.divisor > 1) dividePack<E>(&acc, x.divisor);
    storePack<E>(dst + head + p * kN, acc);
  }
  for (size_t e = head + npacks * kN + first; e < count; e += step) one(e);
}

// dst[e] = src[e] * k for e in [0, count) (PreMulSum's pre-scaling, rounded per element), packs
// where both ends allow them.
template <class E>
ACCL_DEV void scaleRange(typename E::Storage* __restrict__ dst, const typename E::Storage* __restrict__ src,
                         size_t count, size_t first, size_t step, typename E::Compute k) {
  const typename E::Storage* const one = src;
  FoldExtras<E> x;
  x.scaledInput = 0;
  x.k = k;
  foldRange<E, dev::host::SumOp>(dst, [one](int) { return one; }, 1, count, first, step, x);
}

// Copies `bytes` (portable.h's stridedCopy: packs of 16 bytes with several in flight where both
// ends are 16-byte aligned, bytes otherwise). The ends must not overlap.
ACCL_DEV void copyRange(char* __restrict__ dst, const char* __restrict__ src, size_t bytes, size_t first, size_t step) {
  stridedCopy(dst, src, bytes, first, step);
}

}  // namespace accl::kern
