// device_grid.h: the collective kernel's launch geometry (kernels/collective_kernel.h): how many
// blocks each rank's tasks run on and how many threads a block has, from the op, its size, the
// ranks and the device. It depends on nothing a rank sees alone, so every rank of a call picks
// the same (not required for correctness: each rank's blocks count their own progress).
#pragma once
#include <cstddef>
#include "sched/op.h"

namespace accl {

struct DeviceGrid {
  int blocksPerRank;  // blocks for all of one rank's tasks in a launch (at least one per task)
  unsigned threads;   // threads per block, a multiple of 64
};

// bytes: the op's message (an all-reduce's count x element size; a gather's per-rank piece);
// sms: the device's multiprocessors (0: unknown, taken as an H100/H200's 132).
// Small messages get one small block per task; from 1 MiB at least 16 blocks per rank of
// kern::kMaxCollThreads threads, more on devices with more SMs. NCCL_MIN_NCHANNELS /
// NCCL_MAX_NCHANNELS clamp the blocks per rank and NCCL_NTHREADS sets the threads, as in NCCL.
DeviceGrid chooseDeviceGrid(OpKind kind, size_t bytes, int nranks, int sms);

}  // namespace accl
