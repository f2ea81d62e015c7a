// api.h: how an entry point is defined. NCCL_API(ret, ncclX, params) defines the strong
// symbol pncclX and makes ncclX a weak alias of it (nm -D: "T pncclX", "W ncclX"), so a
// profiling library can interpose ncclX and still reach us through pncclX. Internal code
// never calls the public names.
#pragma once
#include "nccl.h"
#include "accl.h"

#define NCCL_API(ret, name, ...)                                                          \
  extern "C" __attribute__((visibility("default"), weak, alias("p" #name))) ret name(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"))) ret p##name(__VA_ARGS__)
