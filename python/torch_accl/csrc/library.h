// library.h: ACCL's libnccl.so.2, opened by absolute path, and the entry points taken from it.
//
// The library is dlopen()ed with RTLD_LOCAL | RTLD_DEEPBIND and every nccl* function is looked
// up in that handle, so torch's own (NVIDIA) libnccl.so.2 in the same process is never called.
#pragma once

#include <string>

#include "accl.h"
#include "nccl.h"

namespace torch_accl {

struct Api {
  void* handle = nullptr;
  std::string path;
#define TORCH_ACCL_FN(name) decltype(&::name) name = nullptr;
#define TORCH_ACCL_FNS(X)                                                                     \
  X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort)                  \
  X(ncclCommGetAsyncError) X(ncclGetErrorString) X(ncclGetLastError) X(ncclAllReduce)         \
  X(ncclBroadcast) X(ncclReduce) X(ncclAllGather) X(ncclReduceScatter) X(ncclSend)            \
  X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd) X(ncclHostStreamCreate)                       \
  X(ncclHostStreamDestroy) X(ncclHostStreamQuery) X(ncclHostStreamSynchronize)                \
  X(ncclHostEventCreate) X(ncclHostEventDestroy) X(ncclHostEventRecord)                       \
  X(ncclHostEventSynchronize) X(ncclAcclVersionString) X(ncclCommInitRankHost)
  TORCH_ACCL_FNS(TORCH_ACCL_FN)
#undef TORCH_ACCL_FN
};

// Opens `path` once per process (a second call must name the same file).
void loadLibrary(const std::string& path);
// The loaded library; raises when loadLibrary has not run.
const Api& api();
// The file that provides `fn` (dladdr), "?" when unknown.
std::string libraryOf(void* fn);

}  // namespace torch_accl
