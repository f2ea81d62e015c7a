// api.h: how an entry point is defined. NCCL_API(ret, ncclX, params) defines the strong
// symbol pncclX and makes ncclX a weak alias of it (nm -D: "T pncclX", "W ncclX"), so a
// profiling library can interpose ncclX and still reach us through pncclX. Internal code
// never calls the public names.
#pragma once
#include <cstring>
#include "nccl.h"
#include "accl.h"

#define NCCL_API(ret, name, ...)                                                          \
  extern "C" __attribute__((visibility("default"), weak, alias("p" #name))) ret name(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"))) ret p##name(__VA_ARGS__)

// An out-of-range enum argument (a user passing 99 as a datatype) must be rejected, not loaded
// as an enum value (undefined behaviour, and UBSan says so): entry points read its bytes.
template <typename E>
inline int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}
