// fuzz_common.h: shared bits of the libFuzzer targets for the wire decoders (src/bootstrap/wire.h).
// A decoder must never crash, read out of bounds or allocate without limit on any input, and
// what it accepts must satisfy the invariants the callers rely on (checked with FUZZ_REQUIRE).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include "bootstrap/wire.h"

#define FUZZ_REQUIRE(cond)                                                  \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      abort();                                                              \
    }                                                                       \
  } while (0)

// The first bytes of the input choose the parameters (magic, nranks...); the rest is the message.
struct FuzzInput {
  const uint8_t* data;
  size_t size;
  template <typename T>
  T take() {
    T v{};
    size_t n = size < sizeof(T) ? size : sizeof(T);
    for (size_t i = 0; i < n; i++) reinterpret_cast<uint8_t*>(&v)[i] = data[i];
    data += n;
    size -= n;
    return v;
  }
};
