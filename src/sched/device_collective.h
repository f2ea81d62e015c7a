// device_collective.h: NCCL's execution model for communicators with a kernel path
// (comm/kernel_path.h): a group's ops are queued at call time as launches of the collective
// kernel (kernels/collective_kernel.h) on the caller's stream, from the calling thread. Nothing
// waits on the host, no second stream sits between the caller's stream and the data, and a
// capture records the launches themselves, so a captured collective replays like any kernel.
#pragma once
#include <functional>
#include <memory>
#include <vector>
#include "sched/op.h"

namespace accl {

// Launches `ops` (one communicator's share of a group; its kernelPath is set; every op on a
// Device stream): each collective one launch, in call order, then all sends and receives in
// one launch (NCCL lets them sit anywhere among the group's collectives). Ops on streams other
// than the first one's are ordered before and after the launches.
// *launched (when given): for the stream claim, a probe saying whether the device has run the
// launches (always true when capturing).
ncclResult_t launchKernelOps(std::vector<std::unique_ptr<OpDesc>> ops, std::function<bool()>* launched = nullptr);

}  // namespace accl
